# -j 1 and -j 3 give the same bits and header; only the items count
# (adds that set a new bit: order-dependent) and the header checksum that
# covers it may differ.
seq 1 300000 > keys.txt
for t in classic blocked; do
    bloomkit create one.bkf -n 300000 -e 0.01 -t $t --force
    cp one.bkf three.bkf
    bloomkit add -j 1 one.bkf keys.txt
    bloomkit add -j 3 three.bkf keys.txt
    head -c 48 one.bkf > a; head -c 48 three.bkf > b; cmp a b && echo "$t: header before items identical"
    dd if=one.bkf bs=8 skip=7 count=8 2>/dev/null > a; dd if=three.bkf bs=8 skip=7 count=8 2>/dev/null > b
    cmp a b && echo "$t: params, flags, payload checksum identical"
    # the part descriptor (offset 128) holds the part's items at 176..183
    dd if=one.bkf bs=8 skip=16 count=6 2>/dev/null > a; dd if=three.bkf bs=8 skip=16 count=6 2>/dev/null > b
    cmp a b && echo "$t: descriptor before items identical"
    tail -c +185 one.bkf > a; tail -c +185 three.bkf > b; cmp a b && echo "$t: rest of descriptor, bits identical"
    bloomkit info one.bkf | grep -v "^items" | sed 's/one.bkf/F/' > a
    bloomkit info three.bkf | grep -v "^items" | sed 's/three.bkf/F/' > b
    cmp a b && echo "$t: info identical but for items"
    seq 299990 300010 | bloomkit check three.bkf | wc -l
done
