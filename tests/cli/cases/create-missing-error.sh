bloomkit create a.bkf --capacity 10
