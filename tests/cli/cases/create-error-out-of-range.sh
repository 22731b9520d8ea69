bloomkit create a.bkf --capacity 10 --error 1.5
