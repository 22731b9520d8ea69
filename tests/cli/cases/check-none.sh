bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
seq 1 100 | bloomkit add a.bkf
printf "abc\n101\n" | bloomkit check a.bkf
