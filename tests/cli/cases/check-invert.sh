bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
seq 1 100 | bloomkit add a.bkf
printf "50\nabc\n100\n101\n" | bloomkit check -v a.bkf
