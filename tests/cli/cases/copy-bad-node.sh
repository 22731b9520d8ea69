bloomkit copy 127.0.0.1:6380 nohost
