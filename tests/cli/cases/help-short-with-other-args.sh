# -h wins over everything else on the line
bloomkit add -h missing.bkf nofile.txt | head -n 2
