bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
printf "\011" | dd of=a.bkf bs=1 seek=8 conv=notrunc 2>/dev/null
bloomkit info a.bkf
