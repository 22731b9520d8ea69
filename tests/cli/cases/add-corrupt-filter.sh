bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf X | dd of=a.bkf bs=1 seek=300 conv=notrunc 2>/dev/null
cp a.bkf before.bkf
echo key | bloomkit add a.bkf
echo "exit $?"
cmp a.bkf before.bkf && echo unchanged
