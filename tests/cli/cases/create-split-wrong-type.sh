bloomkit create --type counting --split -n 10 -e 0.01 c.bkf
