seq 1 100 | bloomkit add new.bkf --capacity 100 --error 0.01 --type classic
bloomkit info new.bkf | grep -E "^(type|capacity|items)"
