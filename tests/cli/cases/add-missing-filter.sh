seq 1 10 | bloomkit add missing.bkf
ls
