# 8 adds of disjoint keys to one file at once: each holds the file's lock
# for its whole read-modify-write, so no add's keys are lost to another's
# rename. b.bkf does not exist yet: the adds that find it missing lock the
# directory, one creates it and the others then add to it.
bloomkit create a.bkf -n 200k -e 0.001 -t classic
for i in 1 2 3 4 5 6 7 8; do
    seq $((i * 100000)) $((i * 100000 + 19999)) > keys$i
done
for i in 1 2 3 4 5 6 7 8; do
    bloomkit add -j1 a.bkf keys$i &
    bloomkit add -j1 b.bkf keys$i -n 200k -e 0.001 -t classic &
done
wait
cat keys1 keys2 keys3 keys4 keys5 keys6 keys7 keys8 | bloomkit check -c a.bkf
cat keys1 keys2 keys3 keys4 keys5 keys6 keys7 keys8 | bloomkit check -c b.bkf
