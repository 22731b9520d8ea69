seq 1 1000 | bloomkit dedup -n 10 -e 0.01 -t classic | wc -l
