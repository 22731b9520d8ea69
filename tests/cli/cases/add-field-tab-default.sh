bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf "1\talice\n2\tbob\n" | bloomkit add a.bkf -f 2
printf "alice\nbob\n1\n" | bloomkit check a.bkf
