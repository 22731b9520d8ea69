bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
seq 1 500 | bloomkit add a.bkf
seq 495 505 | bloomkit check a.bkf
