bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
cp a.bkf b.bkf
printf X | dd of=b.bkf bs=1 seek=300 conv=notrunc 2>/dev/null
bloomkit merge u.bkf a.bkf b.bkf
