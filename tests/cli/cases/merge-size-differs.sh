bloomkit create a.bkf -n 1000 -e 0.01 -t classic
cp a.bkf b.bkf
seq 1 100 | bloomkit add a.bkf
seq 101 200 | bloomkit add b.bkf
bloomkit create c.bkf -n 500 -e 0.01 -t classic
bloomkit merge u.bkf a.bkf b.bkf c.bkf
echo "exit $?"
ls
