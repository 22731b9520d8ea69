bloomkit sync missing.txt 127.0.0.1:1/key
