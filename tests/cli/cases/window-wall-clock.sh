# A time window's clock is the wall clock in milliseconds, kept in the file:
# a key added now is found until the window has passed and forgotten one
# slice later (--window 1s, 3 generations: slices of 500 ms, so gone after
# at most 1.5 s). check does not write the file.
echo old > old
echo new > new
bloomkit create w.bkf -n 1000 -e 0.001 -t window --window 1s --generations 3
bloomkit add w.bkf old
bloomkit check w.bkf old
cp w.bkf before.bkf
sleep 2
bloomkit check w.bkf old; echo "check: $?"
cmp -s w.bkf before.bkf && echo "check wrote nothing"
bloomkit add w.bkf new
bloomkit check w.bkf old new
