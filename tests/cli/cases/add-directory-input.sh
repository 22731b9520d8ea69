bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
mkdir d
bloomkit add a.bkf d
