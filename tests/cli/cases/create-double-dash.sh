bloomkit create --capacity 10 --error 0.01 --type classic -- -odd.bkf
ls
