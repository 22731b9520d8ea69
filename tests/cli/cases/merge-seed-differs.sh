bloomkit create a.bkf -n 1000 -e 0.01 -t classic
bloomkit create b.bkf -n 1000 -e 0.01 -t classic --seed 7
bloomkit merge u.bkf a.bkf b.bkf
