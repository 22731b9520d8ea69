bloomkit cluster add users
