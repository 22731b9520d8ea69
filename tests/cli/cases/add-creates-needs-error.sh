seq 1 100 | bloomkit add new.bkf --capacity 100
ls
