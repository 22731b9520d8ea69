bloomkit cluster add --nodes 127.0.0.1:7000 --shards many users
