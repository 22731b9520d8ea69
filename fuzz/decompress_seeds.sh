#!/bin/sh
# decompress_seeds.sh - the seed corpus of fuzz_decompress
# (fuzz/corpus/decompress). Usage: fuzz/decompress_seeds.sh OUTDIR
#
# Each seed is two control bytes (fuzz_decompress.c: byte 0 the key
# options, byte 1 the size of its small reads) and a small key file: plain
# text, gzip and zstd streams of one, several and empty members / frames,
# truncated, corrupt or followed by trailing bytes. Needs gzip and zstd.
set -eu
out=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

seq -f 'key-%g' 1 50 > "$tmp/lines"
printf 'alpha\nbeta\n\ngamma\r\ndelta' > "$tmp/short"      # an empty line, CR, no last LF
printf 'a,1\tx\nb,2\ty\nc,3\tz\n' > "$tmp/fields"
printf 'one\0two\0\0three\0' > "$tmp/nul"
: > "$tmp/empty"

# seed NAME FLAGS SMALL: the control bytes, then stdin
seed() {
    printf "$(printf '\\%03o\\%03o' "$2" "$3")" > "$out/$1"
    cat >> "$out/$1"
}
gz() { gzip -n -c "$@"; }
zs() { zstd -q -c "$@"; }

seed plain 0 7 < "$tmp/lines"
seed plain-short 0 0 < "$tmp/short"
seed plain-skip-empty 2 3 < "$tmp/short"
seed plain-field2-comma 28 5 < "$tmp/fields"
seed plain-field1-tab 4 9 < "$tmp/fields"
seed plain-nul 1 2 < "$tmp/nul"
seed plain-empty 0 0 < "$tmp/empty"
printf '\037' | seed plain-gzip-first-byte 0 0       # could begin a magic, ends
printf '\050\265\057' | seed plain-zstd-prefix 0 1   # three bytes of zstd's magic
printf '\050\265x' | seed plain-zstd-false-start 0 1

gz "$tmp/lines" | seed gzip 0 11
gz "$tmp/short" | seed gzip-short 0 1
gz "$tmp/nul" | seed gzip-nul 1 4
gz "$tmp/fields" | seed gzip-field2 12 6
{ gz "$tmp/lines"; gz "$tmp/short"; } | seed gzip-two-members 0 13
{ gz "$tmp/empty"; gz "$tmp/short"; gz "$tmp/empty"; } | seed gzip-empty-members 0 2
gz "$tmp/empty" | seed gzip-empty 0 0
gz "$tmp/lines" | head -c 60 | seed gzip-truncated 0 9
gz "$tmp/lines" | head -c 10 | seed gzip-header-only 0 3
{ gz "$tmp/short"; printf 'trailing'; } | seed gzip-trailing-bytes 0 5
gz "$tmp/lines" > "$tmp/corrupt.gz"
printf 'Z' | dd of="$tmp/corrupt.gz" bs=1 seek=30 conv=notrunc 2>/dev/null
seed gzip-corrupt 0 8 < "$tmp/corrupt.gz"
gz "$tmp/short" | seed gzip-no-decompress 224 16

zs "$tmp/lines" | seed zstd 0 11
zs "$tmp/short" | seed zstd-short 0 1
zs "$tmp/nul" | seed zstd-nul 1 4
{ zs "$tmp/lines"; zs "$tmp/short"; } | seed zstd-two-frames 0 13
{ zs "$tmp/empty"; zs "$tmp/short"; zs "$tmp/empty"; } | seed zstd-empty-frames 0 2
zs "$tmp/empty" | seed zstd-empty 0 0
zs --no-check "$tmp/lines" | seed zstd-no-checksum 0 17
zs < "$tmp/lines" | seed zstd-size-unknown 0 10     # no content size: from a pipe
zs "$tmp/lines" | head -c 30 | seed zstd-truncated 0 9
{ zs "$tmp/short"; printf '\120\052\115\030\004\000\000\000skip'; zs "$tmp/nul"; } |
    seed zstd-skippable-frame 0 6
{ zs "$tmp/short"; printf 'trailing'; } | seed zstd-trailing-bytes 0 5
zs "$tmp/short" | seed zstd-no-decompress 224 16
