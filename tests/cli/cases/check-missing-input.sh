bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
echo x | bloomkit add a.bkf
echo x > in.txt
bloomkit check a.bkf in.txt missing.txt
