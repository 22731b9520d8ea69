printf 'a\nb\nc\nd\n' > A
printf 'c\nd\ne\nd\n' > B
bloomkit diff A B
