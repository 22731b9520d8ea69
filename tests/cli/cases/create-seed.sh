bloomkit create a.bkf -n 100 -e 0.01 -t classic --seed 0x1234
bloomkit create b.bkf -n 100 -e 0.01 -t classic --seed=4660
cmp a.bkf b.bkf && bloomkit info a.bkf | grep seed
