printf 'alpha\t1\nbeta 2\n' | bloomkit build-map m.bkf || echo "exit $?"
printf 'alpha\t1\nbeta\t4294967296\n' | bloomkit build-map m.bkf || echo "exit $?"
printf 'alpha\t-1\n' | bloomkit build-map m.bkf || echo "exit $?"
printf 'alpha\t1\n' | bloomkit build-map m.bkf --error 1e-9 || echo "exit $?"
printf 'a\n' | bloomkit create --type static s.bkf
echo a | bloomkit get s.bkf || echo "exit $?"
