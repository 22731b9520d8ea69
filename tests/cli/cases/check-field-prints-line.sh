bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf "alice\ncarol\n" | bloomkit add a.bkf
printf "1,alice\n2,bob\n3,carol\n" | bloomkit check -f 2 -d , a.bkf
