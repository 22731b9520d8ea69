seq 1 1000 | sed 's/^/k/' > keys
bloomkit create --type static s.bkf keys
printf 'k1\nk500\nk1000\nabsent-1\nabsent-2\n' | bloomkit check s.bkf
seq 1 1000 | sed 's/^/k/' | bloomkit check s.bkf --total
