bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
seq 1 100 | bloomkit add a.bkf
seq 1 3 | bloomkit check --invert a.bkf
