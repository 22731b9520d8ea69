# A zstd frame whose header promises content its blocks do not hold (one
# empty last block) is damaged wherever it falls in the file; here it
# straddles the 256 KiB the reader reads at a time, where libzstd's
# streaming decoder alone does not compare the sizes.
printf 'a\nb\n' | zstd -q -c > keys.zst                  # a valid frame first
len=$(wc -c < keys.zst)
pad=$((262144 - len - 8 - 5))                           # the bad frame starts 5 bytes before 256 KiB
le32() { printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"; }
{ cat keys.zst; printf '\120\052\115\030'; le32 $pad; head -c $pad /dev/zero
  # frame: single segment, checksum, content size 33; an empty raw last
  # block; the checksum of no content
  printf '\050\265\057\375\044\041\001\000\000\231\351\330\121'; } > bad.zst
bloomkit create f.bkf -n 1000 -e 0.01
bloomkit check -c f.bkf bad.zst; echo "check: $?"
