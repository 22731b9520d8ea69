bloomkit cluster info --nodes 127.0.0.1:99999 users
