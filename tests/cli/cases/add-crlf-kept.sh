bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf "a\r\nb\n" | bloomkit add a.bkf
printf "a\nb\n" | bloomkit check a.bkf
