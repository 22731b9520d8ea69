bloomkit create a.bkf --capacity 1000 --error 0.01 --type cuckoo
bloomkit create b.bkf --capacity 1000 --error 0.01 --type cuckoo
bloomkit merge out.bkf a.bkf b.bkf
echo "exit $?"
test -e out.bkf || echo "no output"
