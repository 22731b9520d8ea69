bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
seq 1 20 | bloomkit add a.bkf
seq 18 25 > x.txt
seq 1 3 > y.txt
bloomkit check a.bkf x.txt y.txt x.txt
