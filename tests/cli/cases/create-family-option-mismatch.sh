bloomkit create a.bkf -n 10 -e 0.01 --type classic --counter-bits 8
