bloomkit create nodir/a.bkf --capacity 10 --error 0.01
