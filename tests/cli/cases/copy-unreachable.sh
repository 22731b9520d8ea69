bloomkit copy 127.0.0.1:1 127.0.0.1:2
