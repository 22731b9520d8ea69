bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
{ echo short; head -c 3000000 /dev/zero | tr "\0" x; } > long.txt
bloomkit add a.bkf long.txt
