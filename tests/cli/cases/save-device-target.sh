# A save replaces the path with a new regular file (temporary + rename):
# a FIFO or a character device there is refused, named, and left as it
# was. The device is a twin of /dev/null (1, 3), made when mknod is
# allowed (root); a FIFO is made in any case.
mkfifo fifo
seq 1 10 > keys
bloomkit create a.bkf -n 100 -e 0.01
bloomkit create fifo -n 100 -e 0.01 --force; echo "create: $?"
bloomkit dedup -n 100 -e 0.01 --save fifo keys; echo "dedup: $?"
bloomkit merge fifo a.bkf; echo "merge: $?"
bloomkit intersect fifo a.bkf; echo "intersect: $?"
bloomkit add fifo keys; echo "add: $?"
bloomkit remove fifo keys; echo "remove: $?"
test -p fifo && echo "fifo is still a FIFO"
# Without the right to mknod (not root), a symlink to /dev/null stands in:
# the save would replace the link, and the target check follows it.
mknod null c 1 3 2>/dev/null || ln -s /dev/null null
bloomkit create null -n 100 -e 0.01 --force 2>&1; echo "create: $?"
bloomkit dedup -n 100 -e 0.01 --save null keys 2>&1; echo "dedup: $?"
bloomkit merge null a.bkf 2>&1; echo "merge: $?"
test -c null && echo "null is still a character device"
