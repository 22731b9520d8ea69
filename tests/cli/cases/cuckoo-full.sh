seq 1 100000 > keys
bloomkit create c.bkf --capacity 100 --error 0.01 --type cuckoo
cp c.bkf before.bkf
bloomkit add c.bkf keys
echo "exit $?"
cmp c.bkf before.bkf && echo unchanged
