bloomkit create a.bkf --error 0.01 --capacity
