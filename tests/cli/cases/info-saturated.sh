bloomkit create b.bkf -n 10 -e 0.01 -t classic
seq 1 5000 | bloomkit add -j 1 b.bkf
bloomkit info b.bkf | grep -E "^(estimated|fill|error now)"
bloomkit info --json b.bkf | grep -o '"estimated_items": [a-z0-9.]*'
