bloomkit create b.bkf -n 10k -e 0.001
bloomkit info --json b.bkf
