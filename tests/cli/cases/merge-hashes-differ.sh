bloomkit create a.bkf -n 1000 -e 0.01 -t classic
bloomkit create b.bkf -n 500 -e 0.0001 -t classic
bloomkit info b.bkf | grep bits
bloomkit merge u.bkf a.bkf b.bkf
