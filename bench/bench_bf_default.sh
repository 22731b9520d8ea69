#!/bin/sh
# bench_bf_default.sh - redis-benchmark on one BF key that BF.ADD creates
# with RedisBloom's defaults, as a growable filter (--bf-growable yes, the
# default) and as a chain of Bloom filters (--bf-growable no), alternating
# on the same server binary.
#
# Usage: bench/bench_bf_default.sh [path/to/bloomkit-server]
#   env: NP (requests per test, default 8000000: the key grows to ~7.6e6
#        items), ROUNDS (A/B pairs, default 2), CLIENTS (default 50),
#        BENCH_THREADS (redis-benchmark --threads, 2), SERVER_THREADS
#        (bloomkit-server --threads, default: one per core)
#
# Each round starts a fresh server (append-only log, fsync every second),
# runs BF.ADD then BF.EXISTS of random keys at -P 64 on the key "bf",
# and prints requests/s, the items the key then holds and BF.INFO Size.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BKS=${1:-${BLOOMKIT_SERVER:-$ROOT/build/release/server/bloomkit-server}}
NP=${NP:-8000000}
ROUNDS=${ROUNDS:-2}

NAME=bench_bf_default.sh
. "$ROOT/bench/lib.sh"
need redis-benchmark redis-cli
need_server

scratch bks-bfdef
PORT=$(free_port)

rate() { # command args...: requests/s as redis-benchmark reports them
    redis-benchmark -p "$PORT" -c "$CLIENTS" --threads "$BT" -n "$NP" -P 64 \
        -r 100000000 --csv "$@" 2>/dev/null | tail -n 1 | cut -d, -f2 | tr -d '"'
}

echo "bloomkit-server: $BKS (threads: $ST, 0 = one per core); $(nproc) cores;" \
     "redis-benchmark -c $CLIENTS --threads $BT -n $NP -P 64 -r 100000000"
echo
echo "| --bf-growable | BF.ADD req/s | BF.EXISTS req/s | items | BF.INFO Size |"
echo "|---|---:|---:|---:|---:|"
r=0
while [ $r -lt "$ROUNDS" ]; do
    for mode in yes no; do
        rm -rf "$TMP/data"
        start_bloomkit "$TMP/data" "$PORT" --bf-growable $mode
        add=$(rate BF.ADD bf __rand_int__)
        exists=$(rate BF.EXISTS bf __rand_int__)
        items=$(redis-cli -p "$PORT" BF.CARD bf)
        size=$(redis-cli -p "$PORT" BF.INFO bf SIZE | tail -n 1)
        printf '| %s | %.0f | %.0f | %s | %s |\n' "$mode" "$add" "$exists" "$items" "$size"
        stop_servers
    done
    r=$((r + 1))
done
