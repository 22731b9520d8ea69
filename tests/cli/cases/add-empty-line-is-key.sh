bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf "a\n\nb\n" | bloomkit add a.bkf
printf "\n" | bloomkit check a.bkf | od -c
