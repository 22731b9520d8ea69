bloomkit create a.bkf --capacity 2.5 --error 0.01
