bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
echo x | bloomkit add a.bkf --capacity 5 --error 0.5 --type blocked
bloomkit info a.bkf | grep -E "^(type|capacity)"
