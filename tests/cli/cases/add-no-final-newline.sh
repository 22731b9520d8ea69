bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf "a\nb" | bloomkit add a.bkf
printf "b\n" | bloomkit check a.bkf
