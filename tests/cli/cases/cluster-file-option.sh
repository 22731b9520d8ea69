bloomkit cluster add --nodes 127.0.0.1:7000 users --jobs 4
