#!/bin/sh
# Install test: `cmake --install` into a scratch prefix, then build a user's
# program against it twice, with find_package(bloomkit) and with pkg-config
# (static and shared), and run each; then check every file installed for
# operators (packaging/CMakeLists.txt): the Redis module, the man pages, the
# sample config, the systemd unit, bash completion and the licence.
# Usage: run.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null

cmake -S "$src/tests/install" -B "$tmp/consumer" \
    -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer"

libdir=$(ls -d "$tmp"/prefix/lib* | head -n 1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
test "$(pkg-config --modversion bloomkit)" = "$(sed -n 's/^project(bloomkit VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")"
# shellcheck disable=SC2046
cc -std=c11 -o "$tmp/pc-static" "$src/tests/install/consumer.c" \
    $(pkg-config --define-prefix --cflags bloomkit) "$libdir/libbloomkit.a" -lpthread -lm
"$tmp/pc-static"
# shellcheck disable=SC2046
cc -std=c11 -o "$tmp/pc-shared" "$src/tests/install/consumer.c" \
    $(pkg-config --define-prefix --cflags --libs bloomkit)
LD_LIBRARY_PATH="$libdir" "$tmp/pc-shared"
echo "install test: find_package, pkg-config static and shared all work"

prefix=$tmp/prefix
fail() { echo "install test: $*" >&2; exit 1; }

# The Redis module, where docs/MODULE.md says it is.
module=$libdir/bloomkit/bloomkit.so
[ -f "$module" ] || fail "no module at $module"
nm -D --defined-only "$module" | grep -qw RedisModule_OnLoad ||
    fail "$module does not export RedisModule_OnLoad"

# Man pages: render without a groff warning, and hold the --help texts
# line for line (bloomkit: the top level and every subcommand it lists).
man1=$prefix/share/man/man1
for page in bloomkit bloomkit-server; do
    [ -f "$man1/$page.1" ] || fail "no man page $man1/$page.1"
    warnings=$(LC_ALL=C MANWIDTH=200 man -l "$man1/$page.1" 2>&1 >/dev/null)
    [ -z "$warnings" ] || fail "$page.1: $warnings"
done
strip() { sed -e 's/^ *//' -e 's/ *$//' -e '/^$/d'; }
LC_ALL=C MANWIDTH=200 man -l "$man1/bloomkit.1" 2>/dev/null | strip > "$tmp/bloomkit.txt"
commands=$("$prefix/bin/bloomkit" --help | awk '
    /^[A-Z][A-Z ]*$/ { in_cmds = ($0 == "COMMANDS"); next }
    in_cmds && /^  [a-z][a-z-]* / { print $1 }' | sort -u)
[ -n "$commands" ] || fail "bloomkit --help lists no commands"
for c in "" $commands; do
    if [ -z "$c" ]; then "$prefix/bin/bloomkit" --help; else "$prefix/bin/bloomkit" help "$c"; fi |
        strip > "$tmp/help.txt"
    missing=$(grep -v -x -F -f "$tmp/bloomkit.txt" "$tmp/help.txt" | head -n 1)
    [ -z "$missing" ] || fail "bloomkit.1 lacks a line of 'bloomkit help $c': $missing"
done
LC_ALL=C MANWIDTH=200 man -l "$man1/bloomkit-server.1" 2>/dev/null | strip > "$tmp/server.txt"
"$prefix/bin/bloomkit-server" --help | sed '1d' | strip > "$tmp/help.txt"
missing=$(grep -v -x -F -f "$tmp/server.txt" "$tmp/help.txt" | head -n 1)
[ -z "$missing" ] || fail "bloomkit-server.1 lacks a line of its --help: $missing"

# The sample config: the installed server starts with it (on a Unix socket
# in a scratch directory instead of its port and /var/lib) and answers.
conf=$prefix/etc/bloomkit/bloomkit-server.conf
[ -f "$conf" ] || fail "no sample config at $conf"
"$prefix/bin/bloomkit-server" "$conf" --dir "$tmp/data" --port 0 \
    --unixsocket "$tmp/server.sock" > "$tmp/server.log" 2>&1 &
server=$!
i=0
until [ "$(redis-cli -s "$tmp/server.sock" PING 2>/dev/null)" = PONG ]; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 $server 2>/dev/null; then
        cat "$tmp/server.log" >&2
        kill $server 2>/dev/null || true
        fail "bloomkit-server did not start with $conf"
    fi
    sleep 0.1
done
[ "$(redis-cli -s "$tmp/server.sock" CONFIG GET appendfsync | tail -n 1)" = everysec ] ||
    fail "the sample config's appendfsync was not applied"
kill $server
wait $server || fail "bloomkit-server did not stop cleanly on SIGTERM"

# The systemd unit starts the installed server with the installed config.
unit=$prefix/lib/systemd/system/bloomkit-server.service
[ -f "$unit" ] || fail "no systemd unit at $unit"
[ "$(sed -n 's/^ExecStart=//p' "$unit")" = "$prefix/bin/bloomkit-server $conf" ] ||
    fail "$unit: ExecStart is not '$prefix/bin/bloomkit-server $conf'"
if command -v systemd-analyze >/dev/null 2>&1; then
    MANPATH=$prefix/share/man systemd-analyze verify "$unit" ||
        fail "systemd-analyze verify $unit failed"
fi

# bash completion: subcommands, and a subcommand's options from its help.
completion=$prefix/share/bash-completion/completions/bloomkit
[ -f "$completion" ] || fail "no bash completion at $completion"
complete() {
    PATH=$prefix/bin:$PATH bash -c '. "$1"; shift; COMP_WORDS=("$@");
        COMP_CWORD=$(($# - 1)); _bloomkit; echo "${COMPREPLY[*]}"' sh "$completion" "$@"
}
[ "$(complete bloomkit cre)" = create ] || fail "completion of 'bloomkit cre': $(complete bloomkit cre)"
[ "$(complete bloomkit add f.bkf --str)" = --strict ] ||
    fail "completion of 'bloomkit add f.bkf --str': $(complete bloomkit add f.bkf --str)"
[ "$(complete bloomkit create -t cu)" = cuckoo ] || fail "completion of 'bloomkit create -t cu'"

# The licence.
license=$prefix/share/doc/bloomkit/LICENSE
[ -f "$license" ] || fail "no licence at $license"
head -n 1 "$license" | grep -qx "MIT License" || fail "$license is not the MIT licence"
grep -qx "Copyright (c) the bloomkit authors" "$license" || fail "$license: no copyright line"

echo "install test: module, man pages, config, systemd unit, completion and licence installed and working"
