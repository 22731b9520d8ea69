bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
seq 1 3 | bloomkit add a.bkf
printf "1\n4\n3\n" | bloomkit check --count a.bkf
