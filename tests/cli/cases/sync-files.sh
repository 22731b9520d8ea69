printf 'a\nb\nc' > A
printf 'c\nd\n' > B
bloomkit sync A B
cat A
echo --
cat B
bloomkit diff A B --quiet && echo same
bloomkit sync A - || echo "exit $?"
