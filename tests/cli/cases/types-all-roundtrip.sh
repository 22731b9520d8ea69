# every --type creates, adds, checks and reports itself
seq 1 200 > keys
for t in blocked classic counting deletable cuckoo scalable window; do
    extra=
    [ $t = window ] && extra="--window 60s"
    bloomkit create f-$t.bkf --capacity 1000 --error 0.01 --type $t $extra || exit 1
    bloomkit add f-$t.bkf keys || exit 1
    echo "$t $(bloomkit check -c f-$t.bkf keys) $(bloomkit info --json f-$t.bkf | sed 's/.*"type": "\([a-z]*\)".*"items": \([0-9]*\).*/\1 \2/')"
done
