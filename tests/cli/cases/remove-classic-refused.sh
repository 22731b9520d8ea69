bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
echo 1 | bloomkit add a.bkf
cp a.bkf before.bkf
echo 1 | bloomkit remove a.bkf
echo "exit $?"
cmp a.bkf before.bkf && echo unchanged
