printf "1\n2\n" > x.txt
printf "2\n3\n1\n4\n" > y.txt
bloomkit dedup -n 10 -e 0.01 x.txt y.txt x.txt
