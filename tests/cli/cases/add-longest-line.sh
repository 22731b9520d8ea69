bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
{ head -c 1048576 /dev/zero | tr "\0" x; echo; } > long.txt
bloomkit add a.bkf long.txt && bloomkit check --total a.bkf long.txt
