#!/bin/sh
# CLI tests in the style of zstd's cli-tests: every tests/cli/cases/NAME.sh
# runs with `bloomkit` on PATH in a fresh temporary directory, and its
# stdout, stderr and exit status must equal NAME.stdout.exact,
# NAME.stderr.exact and NAME.exit exactly (a missing .exact file means the
# stream must be empty; a missing .exit means 0).
#
# Usage: run.sh PATH/TO/bloomkit [CASE...]
#   CASE names (without .sh) restrict the run; BLOOMKIT_KEEP=1 keeps the
#   temporary directories of failed cases.
set -u
bin=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
cases=$here/cases
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bloomkit-cli.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
ln -s "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" "$tmp/bin/bloomkit"

if [ $# -gt 0 ]; then
    list=$*
else
    list=$(cd "$cases" && ls *.sh | sed 's/\.sh$//')
fi

passed=0
failed=0
for name in $list; do
    work=$tmp/work/$name
    mkdir -p "$work"
    (cd "$work" && PATH="$tmp/bin:$PATH" LC_ALL=C SRC="$(cd "$here/../.." && pwd)" \
        sh "$cases/$name.sh" >"$tmp/out" 2>"$tmp/err" </dev/null)
    status=$?
    expected_status=0
    [ -f "$cases/$name.exit" ] && expected_status=$(cat "$cases/$name.exit")
    ok=1
    for stream in stdout stderr; do
        actual=$tmp/out
        [ $stream = stderr ] && actual=$tmp/err
        expected=$cases/$name.$stream.exact
        if [ -f "$expected" ]; then
            cmp -s "$expected" "$actual" || {
                ok=0
                echo "FAIL $name: $stream differs:"
                diff "$expected" "$actual" | head -n 20
            }
        elif [ -s "$actual" ]; then
            ok=0
            echo "FAIL $name: unexpected $stream:"
            head -n 20 "$actual"
        fi
    done
    if [ "$status" != "$expected_status" ]; then
        ok=0
        echo "FAIL $name: exit status $status, expected $expected_status"
    fi
    if [ $ok = 1 ]; then
        passed=$((passed + 1))
        rm -rf "$work"
    else
        failed=$((failed + 1))
        if [ "${BLOOMKIT_KEEP:-0}" = 1 ]; then
            mkdir -p "${TMPDIR:-/tmp}/bloomkit-cli-failed"
            cp -r "$work" "${TMPDIR:-/tmp}/bloomkit-cli-failed/"
        fi
    fi
done
echo "$passed passed, $failed failed"
[ $failed = 0 ]
