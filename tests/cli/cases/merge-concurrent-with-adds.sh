# merge OUT holds OUT's lock like add: merges into a file and adds to it at
# the same time lose no keys (OUT is also an input here).
bloomkit create a.bkf -n 200k -e 0.001 -t classic
for i in 1 2 3 4; do
    cp a.bkf b$i.bkf
    seq $((i * 100000)) $((i * 100000 + 9999)) > keys$i
    seq $((i * 100000 + 50000)) $((i * 100000 + 59999)) > more$i
    bloomkit add -j1 b$i.bkf more$i
done
for i in 1 2 3 4; do
    bloomkit add -j1 a.bkf keys$i &
    bloomkit merge a.bkf a.bkf b$i.bkf &
done
wait
cat keys1 keys2 keys3 keys4 more1 more2 more3 more4 | bloomkit check -c a.bkf
