bloomkit create a.bkf --capacity 1000 --error 0.01 --type classic
bloomkit check a.bkf < /dev/null
