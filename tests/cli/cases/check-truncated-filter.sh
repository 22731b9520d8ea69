bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
head -c 100 a.bkf > t.bkf
echo x | bloomkit check t.bkf
