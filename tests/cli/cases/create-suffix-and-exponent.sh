bloomkit create a.bkf -n 2M -e 1e-3 -t classic
bloomkit create b.bkf -n 2e6 -e 0.001 -t classic
cmp a.bkf b.bkf && echo same
