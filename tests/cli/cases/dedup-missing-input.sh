printf "1\n2\n1\n" > x.txt
bloomkit dedup -n 10 -e 0.01 x.txt missing.txt x.txt
