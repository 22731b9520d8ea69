bloomkit create a.bkf -n 1000 -e 0.001 -t classic
cp a.bkf b.bkf
seq 1 100 | bloomkit add a.bkf
seq 51 150 | bloomkit add b.bkf
bloomkit intersect both.bkf a.bkf b.bkf
seq 1 150 | bloomkit check -c both.bkf
seq 51 100 | bloomkit check -c -v both.bkf
