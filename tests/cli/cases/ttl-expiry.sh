# --type ttl: each add gives its keys a TTL from now (--ttl, default the
# filter's max TTL); check answers for the present. With a max TTL of 4s
# and 9 generations the granularity is 500ms: keys added with --ttl 200ms
# are found at once and gone 1.2s later (past 200ms + 500ms), while the
# keys added with the max TTL are still found (at 1e-5 a false positive
# among the 1000 expired keys is a one-in-a-thousand event). dedup takes
# --ttl too.
seq 1 1000 > long
seq 2001 3000 > short
bloomkit create s.bkf -n 10000 -e 0.00001 --type ttl --max-ttl 4s --generations 9
bloomkit add s.bkf long
bloomkit add s.bkf --ttl 200ms short
bloomkit check -c s.bkf long
bloomkit check -c s.bkf short
sleep 1.2
bloomkit check -c s.bkf long
bloomkit check -c s.bkf short
bloomkit info s.bkf | grep -E '^(type|max TTL \(ms\)|granularity \(ms\)|generations):'
printf 'a\nb\na\nc\nb\n' | bloomkit dedup -n 100 -e 0.01 --type ttl --max-ttl 1m --ttl 30s
