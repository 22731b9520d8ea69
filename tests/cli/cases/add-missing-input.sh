bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
cp a.bkf before.bkf
seq 1 10 > keys.txt
bloomkit add a.bkf keys.txt nofile.txt
echo "exit $?"
cmp a.bkf before.bkf && echo unchanged
