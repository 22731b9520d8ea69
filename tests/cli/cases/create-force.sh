bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
bloomkit create a.bkf --capacity 10 --error 0.5 --type classic --force
bloomkit info a.bkf | grep -E "^(bits|capacity)"
