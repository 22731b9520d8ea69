bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
head -c 1300 a.bkf > t.bkf
bloomkit info t.bkf
