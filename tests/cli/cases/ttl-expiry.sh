# --type ttl: each add gives its keys a TTL from now (--ttl, default the
# filter's max TTL); check answers for the present. With a max TTL of 8s
# and 9 generations the granularity is 1s: keys added with --ttl 1s are
# found at once (the next command starts well within the second, even
# under a sanitizer on a loaded machine) and gone 2.5s later (past 1s +
# 1s), while the keys added with the max TTL are still found (at 1e-5 a
# false positive
# among the 1000 expired keys is a one-in-a-thousand event). dedup takes
# --ttl too.
seq 1 1000 > long
seq 2001 3000 > short
bloomkit create s.bkf -n 10000 -e 0.00001 --type ttl --max-ttl 8s --generations 9
bloomkit add s.bkf long
bloomkit add s.bkf --ttl 1s short
bloomkit check -c s.bkf long
bloomkit check -c s.bkf short
sleep 2.5
bloomkit check -c s.bkf long
bloomkit check -c s.bkf short
bloomkit info s.bkf | grep -E '^(type|max TTL \(ms\)|granularity \(ms\)|generations):'
printf 'a\nb\na\nc\nb\n' | bloomkit dedup -n 100 -e 0.01 --type ttl --max-ttl 1m --ttl 30s
