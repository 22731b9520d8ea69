bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
head -c 127 a.bkf > t.bkf
bloomkit info t.bkf
