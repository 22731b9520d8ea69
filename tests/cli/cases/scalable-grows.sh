seq 1 5000 > keys
bloomkit create s.bkf --capacity 100 --error 0.01 --type scalable
bloomkit add -j 1 s.bkf keys
bloomkit check -c s.bkf keys
bloomkit info --json s.bkf | sed 's/.*"items": \([0-9]*\).*"parts": \([0-9]*\).*/items \1 stages \2/'
