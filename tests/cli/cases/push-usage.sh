# wrong arguments, a non-static file, an unreachable server, an existing
# FILE for pull: each refused with its reason, exit 2
printf 'a\nb\n' > keys.txt
bloomkit create --type static s.bkf keys.txt
bloomkit create b.bkf --capacity 100 --error 0.01
bloomkit push s.bkf 127.0.0.1:1; echo "exit $?"
bloomkit push s.bkf 127.0.0.1:1 k extra; echo "exit $?"
bloomkit push s.bkf 127.0.0.1:1 k --chunk-size 10; echo "exit $?"
bloomkit push s.bkf 127.0.0.1:1 k --force; echo "exit $?"
bloomkit push s.bkf nohost k; echo "exit $?"
bloomkit push b.bkf 127.0.0.1:1 k; echo "exit $?"
bloomkit push keys.txt 127.0.0.1:1 k; echo "exit $?"
bloomkit push s.bkf 127.0.0.1:1 k; echo "exit $?"
bloomkit pull 127.0.0.1:1 k s.bkf; echo "exit $?"
bloomkit pull 127.0.0.1:1 k; echo "exit $?"
