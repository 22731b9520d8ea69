bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf "4\n" | bloomkit check --count a.bkf
