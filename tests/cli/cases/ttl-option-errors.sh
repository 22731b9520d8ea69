# A ttl filter needs --max-ttl (a duration with a unit); --max-ttl belongs
# to --type ttl; --ttl to ttl filters and at most their max TTL.
bloomkit create a.bkf -n 100 -e 0.01 --type ttl; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 --type ttl --max-ttl 10; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 --type ttl --max-ttl soon; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 --max-ttl 1h; echo "exit $?"
bloomkit create a.bkf -n 100 -e 0.01 --type ttl --max-ttl 1h --generations 1; echo "exit $?"
bloomkit create t.bkf -n 100 -e 0.01 --type ttl --max-ttl 1m && echo "created"
printf 'x\n' > keys
bloomkit add t.bkf --ttl 2m keys; echo "exit $?"
bloomkit add t.bkf --ttl 0s keys; echo "exit $?"
bloomkit create b.bkf -n 100 -e 0.01
bloomkit add b.bkf --ttl 1s keys; echo "exit $?"
printf 'x\n' | bloomkit dedup -n 100 -e 0.01 --ttl 1s; echo "exit $?"
