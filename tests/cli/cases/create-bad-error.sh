bloomkit create a.bkf --capacity 10 --error often
