printf 'a\nb\n' > A
printf 'b\na\na\n' > B
bloomkit diff A B --quiet
