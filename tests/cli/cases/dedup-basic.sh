printf "b\na\nb\nc\na\n\n\nd" | bloomkit dedup -n 100 -e 0.001
