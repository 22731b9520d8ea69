bloomkit create a.bkf --capacity 1T --error 1e-300 --type classic
ls
