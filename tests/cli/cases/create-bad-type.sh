bloomkit create a.bkf --capacity 10 --error 0.01 --type bitmap
