bloomkit create a.bkf --capacity -5 --error 0.01
