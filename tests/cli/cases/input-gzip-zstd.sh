# Compressed key files are recognised by their first bytes (not their
# names) and decompressed: gzip (several members too) and zstd, from files
# and from standard input; --no-decompress reads the bytes as keys.
seq 1 1000 > keys
gzip -c keys > keys.gz
cp keys.gz renamed
zstd -q -c keys > keys.zst
seq 1001 2000 | gzip -c > more.gz
cat keys.gz more.gz > two-members.gz
bloomkit create f.bkf -n 10000 -e 0.0001 -t classic
bloomkit add f.bkf keys.gz
bloomkit check -c f.bkf keys
bloomkit check -c f.bkf renamed
bloomkit check -c f.bkf keys.zst
bloomkit check -c f.bkf < keys.zst
bloomkit check -c f.bkf --no-decompress keys.gz
bloomkit dedup -n 10000 -e 0.0001 two-members.gz keys.zst | wc -l
bloomkit add g.bkf -n 10000 -e 0.0001 -t classic < two-members.gz
seq 1 2000 | bloomkit check -c g.bkf
