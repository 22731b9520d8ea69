seq 1 50 | bloomkit dedup -n 100 -e 0.01 -t classic --save seen.bkf > /dev/null
bloomkit info seen.bkf | grep -E "^(type|items|capacity)"
seq 45 55 | bloomkit check -v seen.bkf
