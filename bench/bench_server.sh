#!/bin/sh
# bench_server.sh - redis-benchmark against bloomkit-server and, in the same
# run, against Debian's redis-server doing plain SET and GET (the protocol
# ceiling of real Redis on this machine).
#
# Usage: bench/bench_server.sh [path/to/bloomkit-server]
#   env: N (requests at -P 1, default 200000), NP (requests at -P 64,
#        default 2000000), NM (MADD/MEXISTS commands, default 20000),
#        CLIENTS (default 50), BENCH_THREADS (redis-benchmark --threads, 2),
#        SERVER_THREADS (bloomkit-server --threads, default: one per core)
#
# Both servers listen on free loopback ports with temporary directories
# and are stopped at the end (also on failure or Ctrl-C). bloomkit-server
# runs with its defaults (append-only log, fsync every second); redis-server
# with persistence off (its best case).
#
# Output: one table row per test: requests/s, items/s, p50 and p99 latency
# (ms, as redis-benchmark reports them), then the ratios the issue targets.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BKS=${1:-${BLOOMKIT_SERVER:-$ROOT/build/release/server/bloomkit-server}}
NAME=bench_server.sh
. "$ROOT/bench/lib.sh"
need redis-benchmark redis-server redis-cli
need_server

start_pair bks-bench --appendonly no

redis-cli -p "$BK_PORT" BF.RESERVE bf 0.01 20000000 >/dev/null


echo "bloomkit-server: $BKS (threads: ${ST:-0} = one per core), redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')"
table_head
for P in 1 64; do
    if [ $P = 1 ]; then n=$N; else n=$NP; fi
    bench "redis-server SET"                 "$RS_PORT" $P $n 1 -t set
    bench "redis-server GET"                 "$RS_PORT" $P $n 1 -t get
    bench "bloomkit-server BF.ADD"           "$BK_PORT" $P $n 1 BF.ADD bf __rand_int__
    bench "bloomkit-server BF.EXISTS"        "$BK_PORT" $P $n 1 BF.EXISTS bf __rand_int__
done
# shellcheck disable=SC2086
bench "bloomkit-server BF.MADD x100"         "$BK_PORT" 1 "$NM" 100 BF.MADD bf $MADD_ARGS
# shellcheck disable=SC2086
bench "bloomkit-server BF.MEXISTS x100"      "$BK_PORT" 1 "$NM" 100 BF.MEXISTS bf $MADD_ARGS
echo
echo "command: $0 $*  (N=$N NP=$NP NM=$NM CLIENTS=$CLIENTS BENCH_THREADS=$BT SERVER_THREADS=$ST)"
