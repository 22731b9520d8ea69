#!/bin/sh
# De-duplicate URL-like lines three ways and compare wall time, peak memory
# and lines kept against the exact answer:
#   bloomkit dedup -n LINES -e ERROR    (filter sized for every line distinct)
#   awk '!seen[$0]++'                   (exact, a hash table of every line)
#   sort -u                             (exact, external sort; order lost)
# Peak memory and wall time come from GNU time -v (Debian package `time`).
#
# Usage: bench/dedup.sh [BLOOMKIT] [LINES...]
#   BLOOMKIT defaults to build/release/cli/bloomkit; LINES to 1e7 and 1e8
#   (written as 10000000 100000000). ERROR=1e-4 and TMPDIR=/tmp by default.
#   Input is generated into $TMPDIR (about 64 bytes a line: 6.4 GB at 1e8).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bloomkit=${1:-$here/../build/release/cli/bloomkit}
[ $# -gt 0 ] && shift
sizes=${*:-10000000 100000000}
error=${ERROR:-1e-4}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bk-dedup.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
cc -O2 -o "$tmp/gen_urls" "$here/gen_urls.c"

awk_name=$(readlink -f "$(command -v awk)")
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores"
echo "awk: $awk_name; sort: $(sort --version | head -n 1)"
echo "bloomkit dedup -e $error, capacity = lines"
echo
printf '| lines | tool | wall s | peak RSS MB | lines kept | exact | dropped (false positives) |\n'
printf '|---|---|---|---|---|---|---|\n'

measure() { # name lines exact command...
    name=$1 lines=$2 exact=$3
    shift 3
    /usr/bin/time -v -o "$tmp/time" "$@" > "$tmp/out"
    wall=$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$tmp/time" |
           awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }')
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time")
    kept=$(wc -l < "$tmp/out")
    printf '| %s | %s | %s | %.0f | %s | %s | %s |\n' "$lines" "$name" "$wall" \
        "$(echo "$rss / 1024" | bc -l)" "$kept" "$exact" "$((exact - kept))"
}

for n in $sizes; do
    "$tmp/gen_urls" "$n" 0.3 1 > "$tmp/in" 2> "$tmp/distinct"
    exact=$(sed -n 's/^distinct //p' "$tmp/distinct")
    measure "bloomkit dedup" "$n" "$exact" "$bloomkit" dedup -q -n "$n" -e "$error" "$tmp/in"
    measure "awk '!seen[\$0]++'" "$n" "$exact" awk '!seen[$0]++' "$tmp/in"
    measure "sort -u" "$n" "$exact" env LC_ALL=C sort -u -T "$tmp" "$tmp/in"
    rm -f "$tmp/in" "$tmp/out"
done
