bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf "1,alice\n2,bob\n3\n4,carol\n" > in.csv
bloomkit add a.bkf -f 2 -d , in.csv
