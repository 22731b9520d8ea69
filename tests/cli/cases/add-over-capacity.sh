# An add that takes a filter past its capacity (or its measured rate past
# 1.5 times the target) warns once, with the rate now; --strict refuses
# it and leaves the file as it was. Filling to the capacity is quiet.
bloomkit create a.bkf -n 10000 -e 0.01 -t classic
seq 1 10000 | bloomkit add -j1 a.bkf; echo "to capacity: $?"
cp a.bkf before.bkf
seq 10001 28500 | bloomkit add -j1 --strict a.bkf; echo "strict: $?"
cmp -s a.bkf before.bkf && echo "unchanged"
seq 10001 28500 | bloomkit add -j1 a.bkf; echo "warned: $?"
seq 1 28500 | bloomkit check -c a.bkf
bloomkit create t.bkf -n 10 -e 0.01 -t classic
seq 1 100000 | bloomkit add -j1 t.bkf; echo "tiny: $?"
