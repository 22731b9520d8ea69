bloomkit create a.bkf -n 10 -e 0.01 --bucket-size 4
