#!/bin/bash
# run.sh - the static blocklist, built, pushed and swapped under load (README.md).
#
#   examples/blocklist/run.sh [--keys N] [--change F] [--error P] [--probes M]
#                             [--clients C] [--chunk-size BYTES] [--settle S]
#                             [--direct-swap] [--check]
#
# Starts its own bloomkit-server (a free port, a scratch --dir removed at
# exit), builds version 1 and 2 of the list with the CLI, pushes v1, swaps
# in v2 while clients check, prints the numbers. --check: exit 1 unless
# every check holds. Binaries: $BLOOMKIT_SERVER and $BLOOMKIT_CLI, default
# ../../build/release/{server/bloomkit-server,cli/bloomkit} from this script.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
server=${BLOOMKIT_SERVER:-$here/../../build/release/server/bloomkit-server}
cli=${BLOOMKIT_CLI:-$here/../../build/release/cli/bloomkit}
for b in "$server" "$cli"; do
    [ -x "$b" ] || { echo "run.sh: no $b (build it, or set BLOOMKIT_SERVER / BLOOMKIT_CLI)" >&2; exit 2; }
done

scratch=$(mktemp -d /tmp/bk-blocklist.XXXXXX)
cleanup() {
    if [ -f "$scratch/server.pid" ]; then
        kill -9 "$(cat "$scratch/server.pid")" 2>/dev/null || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
/usr/bin/python3 "$here/blocklist.py" --server "$server" --cli "$cli" --scratch "$scratch" --port "$port" "$@"
