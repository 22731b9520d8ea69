printf 'a\na\na\nb\n' > keys
bloomkit create c.bkf --capacity 1000 --error 0.01 --type cuckoo
bloomkit add c.bkf keys
printf 'a\nb\nz\n' | bloomkit check --count c.bkf
echo a | bloomkit remove c.bkf; echo "remove $?"
printf 'a\nb\n' | bloomkit check --count c.bkf
