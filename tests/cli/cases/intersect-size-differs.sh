bloomkit create a.bkf -n 1000 -e 0.01 -t classic
bloomkit create b.bkf -n 2000 -e 0.01 -t classic
bloomkit intersect both.bkf a.bkf b.bkf
