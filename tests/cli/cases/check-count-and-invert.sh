bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
echo 1 | bloomkit check --count -v a.bkf
