#!/bin/bash
# examples/guard/run.sh [--ids N] [--queries Q] [--absent 0.5] [--error 0.01]
#                       [--filter cbf|bf] [--seed S]     (run.sh --help: all)
#
# A Bloom filter in front of PostgreSQL: starts both servers in a scratch
# directory, runs the example (guard.py) and removes everything at exit.
# Exit 0: every check passed; 1: one failed; 77: PostgreSQL is not installed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export BLOOMKIT_SERVER=${BLOOMKIT_SERVER:-$here/../../build/release/server/bloomkit-server}

# Debian's postgresql: /usr/lib/postgresql/<version>/bin, the newest
# (BK_GUARD_PGROOT=/nonexistent shows the skip)
pgbin=$(ls -d "${BK_GUARD_PGROOT:-/usr/lib/postgresql}"/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pgbin" ] || [ ! -x "$pgbin/initdb" ] || [ ! -x "$pgbin/psql" ]; then
    echo "run.sh: PostgreSQL is not installed (apt-get install postgresql): skipped" >&2
    exit 77
fi
if [ ! -x "$BLOOMKIT_SERVER" ]; then
    echo "run.sh: no bloomkit-server at $BLOOMKIT_SERVER (run make, or set BLOOMKIT_SERVER)" >&2
    exit 1
fi

as_pg=""
[ "$(id -u)" = 0 ] && as_pg="runuser -u postgres --"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/bk-guard.XXXXXX")
child=""

cleanup() {
    # guard.py stops both servers itself; this is for when it could not
    if [ -f "$scratch/pg/data/postmaster.pid" ]; then
        $as_pg "$pgbin/pg_ctl" -D "$scratch/pg/data" -m immediate -w stop >/dev/null 2>&1
    fi
    if [ -f "$scratch/bloomkit.pid" ]; then
        kill -9 "$(cat "$scratch/bloomkit.pid")" 2>/dev/null
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT
trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null; wait "$child"; exit 143' INT TERM

/usr/bin/python3 -B "$here/guard.py" --scratch "$scratch" --pg-bindir "$pgbin" "$@" &
child=$!
wait "$child"
