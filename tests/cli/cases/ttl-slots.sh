# --slots S sets a ttl table's granularity to max TTL / S (1 to 64); it
# belongs to --type ttl and not with --generations (the other layout).
# More slots take more expiry bits an entry: 7 at 60 slots against 4 at
# the default 12, so the same capacity takes more memory.
bloomkit create fine.bkf -n 1000 -e 0.01 --type ttl --max-ttl 1h --slots 60
bloomkit create plain.bkf -n 1000 -e 0.01 --type ttl --max-ttl 1h
bloomkit info fine.bkf | grep -E '^(granularity \(ms\)|table layout):'
bloomkit info plain.bkf | grep -E '^granularity \(ms\):'
fine=$(bloomkit info --json fine.bkf | tr ',' '\n' | grep '"file_bytes"' | tr -dc 0-9)
plain=$(bloomkit info --json plain.bkf | tr ',' '\n' | grep '"file_bytes"' | tr -dc 0-9)
[ "$fine" -gt "$plain" ] && echo "60 slots take more bytes"
printf 'a\nb\n' > keys
bloomkit add fine.bkf --ttl 30m keys && bloomkit check -c fine.bkf keys
bloomkit create x.bkf -n 1000 -e 0.01 --type ttl --max-ttl 1h --slots 65; echo "exit $?"
bloomkit create x.bkf -n 1000 -e 0.01 --type ttl --max-ttl 1h --slots 0; echo "exit $?"
bloomkit create x.bkf -n 1000 -e 0.01 --type ttl --max-ttl 1h --slots 4 --generations 5; echo "exit $?"
bloomkit create x.bkf -n 1000 -e 0.01 --slots 4; echo "exit $?"
