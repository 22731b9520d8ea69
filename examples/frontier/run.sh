#!/bin/bash
# run.sh - the de-duplicating URL frontier, end to end (README.md).
#
#   examples/frontier/run.sh [--urls N] [--producers P] [--batch B]
#                            [--error E] [--capacity C] [--kill-at F]
#                            [--appendfsync always|everysec] [--check]
#
# Starts its own bloomkit-server (a free port, a scratch --dir removed at
# exit), runs the producers, kills and restarts the server after a share
# F of the URLs (default 0.5), prints the numbers. --check: exit 1 unless
# every check holds. Binaries: $BLOOMKIT_SERVER, default
# ../../build/release/server/bloomkit-server from this script.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
server=${BLOOMKIT_SERVER:-$here/../../build/release/server/bloomkit-server}
[ -x "$server" ] || { echo "run.sh: no bloomkit-server at $server (build it, or set BLOOMKIT_SERVER)" >&2; exit 2; }

scratch=$(mktemp -d /tmp/bk-frontier.XXXXXX)
cleanup() {
    if [ -f "$scratch/server.pid" ]; then
        kill -9 "$(cat "$scratch/server.pid")" 2>/dev/null || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
/usr/bin/python3 "$here/frontier.py" --server "$server" --scratch "$scratch" --port "$port" "$@"
