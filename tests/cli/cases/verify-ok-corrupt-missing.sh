# bloomkit verify: 0 sound, 1 corrupt (payload checksum), 2 cannot read
bloomkit create good.bkf --capacity 1000 --error 0.01 --type classic
echo key | bloomkit add good.bkf
cp good.bkf bad.bkf
printf X | dd of=bad.bkf bs=1 seek=300 conv=notrunc 2>/dev/null
bloomkit verify good.bkf
echo "exit $?"
bloomkit verify good.bkf bad.bkf
echo "exit $?"
bloomkit verify good.bkf missing.bkf bad.bkf
echo "exit $?"
bloomkit verify
echo "exit $?"
