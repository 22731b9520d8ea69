seq 1 100 > keys
bloomkit create d.bkf --capacity 1000 --error 0.01 --type deletable
bloomkit add d.bkf keys
seq 1 10 | bloomkit remove d.bkf; echo "remove $?"
seq 1 10 | bloomkit check -c d.bkf
seq 11 100 | bloomkit check -c d.bkf
