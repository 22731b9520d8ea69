bloomkit copy a:1 b:2 --pattern
