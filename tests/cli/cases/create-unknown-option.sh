bloomkit create a.bkf -n 10 -e 0.01 --colour red
