printf 'a\n' > A
bloomkit diff A ./127.0.0.1:1/key
