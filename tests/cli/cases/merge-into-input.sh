bloomkit create a.bkf -n 1000 -e 0.01 -t classic
cp a.bkf b.bkf
seq 1 100 | bloomkit add a.bkf
seq 101 200 | bloomkit add b.bkf
bloomkit merge a.bkf a.bkf b.bkf
seq 1 200 | bloomkit check -c a.bkf
