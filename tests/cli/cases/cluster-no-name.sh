bloomkit cluster check --nodes 127.0.0.1:7000
