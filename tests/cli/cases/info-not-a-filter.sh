# Files that are not filters say so, whatever their size.
seq 1 3 > short.txt
seq 1 100000 > long.txt
bloomkit info short.txt; echo "exit $?"
bloomkit info long.txt; echo "exit $?"
bloomkit info /dev/null; echo "exit $?"
echo x | bloomkit check /dev/null; echo "exit $?"
