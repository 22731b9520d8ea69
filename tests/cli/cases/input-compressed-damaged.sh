# A truncated or damaged compressed file is an error naming the file and
# the format; add then leaves the filter file as it was.
seq 1 100000 | gzip -c > keys.gz
seq 1 100000 | zstd -q -c > keys.zst
head -c 20000 keys.gz > cut.gz
head -c 20000 keys.zst > cut.zst
# a gzip header followed by bytes no deflate stream starts with
printf '\037\213\010\000\000\000\000\000\000\003\377\377\377\377' > bad.gz
bloomkit create f.bkf -n 1000 -e 0.01
cp f.bkf before.bkf
bloomkit add f.bkf cut.gz; echo "add: $?"
cmp -s f.bkf before.bkf && echo unchanged
bloomkit check -c f.bkf cut.zst; echo "check: $?"
bloomkit check -c f.bkf bad.gz; echo "check: $?"
# the zstd magic followed by no valid frame header
printf '\050\265\057\375garbage-bytes-here' > bad.zst
bloomkit check -c f.bkf bad.zst; echo "check: $?"
# a lone first byte of a magic is a one-byte key, not a damaged stream
printf '\050' > short
bloomkit check -c f.bkf short; echo "check: $?"
