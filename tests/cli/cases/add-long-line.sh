bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
cp a.bkf before.bkf
{ echo short; echo also-short; head -c 1048577 /dev/zero | tr "\0" x; echo; echo after; } > long.txt
bloomkit add a.bkf long.txt
echo "exit $?"
cmp a.bkf before.bkf && echo unchanged
