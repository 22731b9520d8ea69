# CBF types that remove keys, one after another (same steps for each)
seq 1 100 > keys
seq 1 50 > half
for t in dleft hier hybrid varcount; do
    rm -f c.bkf
    bloomkit create c.bkf --capacity 1000 --error 0.01 --type $t
    bloomkit add c.bkf keys
    bloomkit remove c.bkf half; echo "remove $?"
    bloomkit check -c c.bkf keys
    bloomkit check -c c.bkf half; echo "check $?"
    bloomkit remove c.bkf half; echo "again $?"
    bloomkit info c.bkf | grep -E '^(type|removes keys|items)'
done
