bloomkit cluster
