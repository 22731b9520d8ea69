bloomkit add
