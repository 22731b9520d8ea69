bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
seq 1 100 | bloomkit add a.bkf -j2 -q
seq 100 101 | bloomkit check a.bkf
