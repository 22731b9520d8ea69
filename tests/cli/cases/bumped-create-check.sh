# A bumped static filter of 3000 keys: every key found, info names the
# family and its rate, --error picks 16 bits, and what it refuses.
seq 1 3000 | sed 's/^/k/' > keys
bloomkit create --type bumped b.bkf keys
printf 'k1\nk1500\nk3000\n' | bloomkit check b.bkf
seq 1 3000 | sed 's/^/k/' | bloomkit check b.bkf --total
bloomkit info b.bkf | grep -E '^ *(type|items|target error):'
seq 1 3000 | sed 's/^/k/' | bloomkit create --type bumped b16.bkf --error 0.001
bloomkit info b16.bkf | grep -E '^ *target error:'
bloomkit create --type bumped b12.bkf keys --fingerprint-bits 12 || echo "exit $?"
bloomkit create --type bumped b6.bkf keys --error 1e-6 || echo "exit $?"
bloomkit create --type bumped bn.bkf keys --capacity 10 || echo "exit $?"
echo more | bloomkit add b.bkf || echo "exit $?"
