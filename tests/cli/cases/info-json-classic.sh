bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
seq 1 1000 | bloomkit add -j 1 a.bkf
bloomkit info --json a.bkf
