printf "a\n\nb\n\na\n" | bloomkit dedup --skip-empty -n 10 -e 0.01
