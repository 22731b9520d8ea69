# A growable filter made for 100 keys takes 20000 (it doubled 8 times):
# every added key is found, keys never added are not (0.2% expected),
# and info shows the capacity it has reached (100 x 2^8) and the rate now.
bloomkit create --type growable -n 100 -e 0.01 g.bkf
seq 1 20000 | bloomkit add -j 1 g.bkf
seq 19998 20002 | bloomkit check g.bkf
bloomkit info g.bkf | grep -E "^(type|capacity|removes keys)"
printf 'a\nb\na\nc\nb\n' | bloomkit dedup --type growable -n 10 -e 0.01
