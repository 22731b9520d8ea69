bloomkit create a.bkf --capacity 0 --error 0.01
