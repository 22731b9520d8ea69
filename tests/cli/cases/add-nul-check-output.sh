bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf "x\0y\0" | bloomkit add -0 a.bkf
printf "x\0z\0y" | bloomkit check -0 a.bkf | od -c
