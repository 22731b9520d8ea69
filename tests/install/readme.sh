#!/bin/sh
# The README's examples work as written:
#   - every ```c block that defines main() is compiled as its own program
#     with -std=c11 -Wall -Wextra -Werror against the built library, and
#     run (exit 0);
#   - the ```sh block that starts with the `export PATH=...build/release/cli`
#     line runs in a scratch directory laid out like the repository after
#     `make run` (build/release/cli/bloomkit), each command stopping the
#     test on failure, and prints what the README says it prints.
# Usage: readme.sh SOURCE_DIR PATH/TO/libbloomkit.a PATH/TO/bloomkit
set -eu
src=$1
lib=$2
bin=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "readme test: $*" >&2; exit 1; }

# Block n of a language, numbered from 1, into files $tmp/<lang>-<n>.
awk -v dir="$tmp" '
    /^```[a-z]+$/ && !inside { lang = substr($0, 4); n[lang]++; inside = 1
                               file = dir "/" lang "-" n[lang]; next }
    /^```$/ && inside { inside = 0; close(file); next }
    inside { print > file }' "$src/README.md"

programs=0
for c in "$tmp"/c-*; do
    grep -q '^int main' "$c" || continue
    programs=$((programs + 1))
    mv "$c" "$c.c"
    cc -std=c11 -Wall -Wextra -Werror -I"$src/include" -o "$c.out" "$c.c" \
        "$lib" -lpthread -lm 2> "$tmp/cc.log" ||
        { cat "$tmp/cc.log" >&2; fail "README program $(basename "$c") does not compile"; }
    (cd "$tmp" && "$c.out" > "$c.stdout") || fail "README program $(basename "$c") failed"
done
[ $programs -ge 2 ] || fail "expected at least 2 complete C programs in README.md, found $programs"
grep -qx "user:17 is certainly absent: skip the database" "$tmp"/c-*.stdout ||
    fail "the library example did not print its lookup"
grep -qx "mapped: alice 1" "$tmp"/c-*.stdout || fail "the file example did not map its file"

cli=
for s in "$tmp"/sh-*; do
    head -n 1 "$s" | grep -q '^export PATH="$PWD/build/release/cli:$PATH"' && cli=$s
done
[ -n "$cli" ] || fail "no sh block starting with the export PATH line"
mkdir -p "$tmp/repo/build/release/cli"
ln -s "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" "$tmp/repo/build/release/cli/bloomkit"
# A PATH without any installed bloomkit: the block must find its own.
(cd "$tmp/repo" && PATH=/usr/bin:/bin sh -e "$cli" > "$tmp/cli.out" 2> "$tmp/cli.err") ||
    { cat "$tmp/cli.err" >&2; fail "the README's CLI block failed"; }
[ "$(wc -l < "$tmp/repo/unique.txt")" -eq 200000 ] || fail "dedup did not keep 200000 lines"
grep -qx "bad-7.example" "$tmp/cli.out" || fail "check did not print the listed candidate"
grep -q "good.example" "$tmp/cli.out" && fail "check printed a key that was not added"
grep -q '"type": "blocked"' "$tmp/cli.out" || fail "info --json printed no type"
echo "readme test: $programs C programs compile and run; the CLI block runs as written"
