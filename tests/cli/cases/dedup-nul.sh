printf "a\0b\0a\0c\nd\0b" | bloomkit dedup -0 -n 10 -e 0.01 | od -c
