bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf "1,alice,x\n2,bob,y\n3,,z\n" | bloomkit add a.bkf --field 2 --delimiter ,
printf "alice\nbob\n\n1\nx\n" | bloomkit check a.bkf | od -c
