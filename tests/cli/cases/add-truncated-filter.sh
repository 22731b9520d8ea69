bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
head -c 1000 a.bkf > t.bkf
echo key | bloomkit add t.bkf
