# A time window's clock is the wall clock in milliseconds, kept in the file:
# a key added now is found until the window has passed and forgotten one
# slice later (--window 1s, 3 generations: slices of 500 ms, so gone after
# at most 1.5 s). check does not write the file; info shows the window and
# the clock.
echo old > old
echo new > new
start=$(($(date +%s) * 1000))
bloomkit create w.bkf -n 1000 -e 0.001 -t window --window 1s --generations 3
bloomkit info w.bkf | grep '^error now'   # an empty window: 0, not -0
bloomkit add w.bkf old
bloomkit check w.bkf old
bloomkit info w.bkf | grep -E '^(window|generations)'
clock=$(bloomkit info w.bkf | sed -n 's/^clock (ms): *//p')
[ "$clock" -ge "$start" ] && [ "$clock" -le $(($(date +%s) * 1000 + 1000)) ] &&
    echo "the clock is the wall clock"
cp w.bkf before.bkf
sleep 2
bloomkit check w.bkf old; echo "check: $?"
cmp -s w.bkf before.bkf && echo "check wrote nothing"
bloomkit add w.bkf new
bloomkit check w.bkf old new
