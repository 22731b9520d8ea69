seq 1 300 > a
seq 301 600 > b
bloomkit create a.bkf --capacity 1000 --error 0.01 --type scalable
bloomkit create b.bkf --capacity 1000 --error 0.01 --type scalable
bloomkit create c.bkf --capacity 100 --error 0.01 --type scalable
bloomkit add a.bkf a && bloomkit add b.bkf b && bloomkit add c.bkf b
bloomkit merge out.bkf a.bkf b.bkf; echo "merge $?"
cat a b | bloomkit check -c out.bkf
bloomkit merge bad.bkf a.bkf c.bkf; echo "merge $?"
