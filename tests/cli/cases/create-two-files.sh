bloomkit create a.bkf b.bkf --capacity 10 --error 0.01
