printf "b\na\nb\nc\na\n" | bloomkit dedup -n 100 -e 0.001 -t classic
