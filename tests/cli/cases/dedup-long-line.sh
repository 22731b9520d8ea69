{ echo a; echo b; head -c 1048577 /dev/zero | tr "\0" x; echo; } > in.txt
bloomkit dedup -n 10 -e 0.01 in.txt
