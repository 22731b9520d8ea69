seq 1 1000 > keys
bloomkit create s.bkf --capacity 100 --error 0.01 --type scalable --nonscaling
cp s.bkf before.bkf
bloomkit add s.bkf keys
echo "exit $?"
cmp s.bkf before.bkf && echo unchanged
