bloomkit cluster frob
