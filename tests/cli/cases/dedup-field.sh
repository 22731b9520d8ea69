printf "1,alice\n2,bob\n3,alice\n4,carol\n5,bob\n" | bloomkit dedup -f 2 -d , -n 10 -e 0.01
