seq 1 20 > keys
for i in 1 2 3 4 5 6 7 8 9 10; do echo hot; done > hot
bloomkit create m.bkf --capacity 1000 --error 0.01 --type morris --seed 7
bloomkit add m.bkf keys hot
echo hot | bloomkit check --count m.bkf
bloomkit check -c m.bkf keys
bloomkit remove m.bkf keys; echo "remove $?"
bloomkit info m.bkf | grep -E '^(type|removes keys)'
