#!/bin/sh
# bench_module.sh - redis-benchmark against Debian's redis-server with
# bloomkit.so loaded and, in the same run, against bloomkit-server: the
# same commands from the same command layer, under two hosts.
#
# Usage: bench/bench_module.sh [path/to/bloomkit.so] [path/to/bloomkit-server]
#   env: N (requests at -P 1, default 200000), NP (requests at -P 64,
#        default 2000000), NM (MADD/MEXISTS commands, default 20000),
#        CLIENTS (default 50), BENCH_THREADS (redis-benchmark --threads, 2),
#        SERVER_THREADS (bloomkit-server --threads, default: one per core)
#
# Both servers listen on free loopback ports with temporary directories
# and are stopped at the end (also on failure or Ctrl-C). Persistence is
# off in redis-server (--save "" --appendonly no); bloomkit-server runs
# with its defaults (append-only log, fsync every second). Each holds one
# Bloom filter "bf" of 20 million items at 1%, and redis-server's plain
# SET/GET are measured beside them as the protocol ceiling of real Redis.
#
# Output: one table row per test: requests/s, items/s, p50 and p99 latency
# (ms, as redis-benchmark reports them).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MOD=${1:-${BLOOMKIT_MODULE:-$ROOT/build/release/module/bloomkit.so}}
BKS=${2:-${BLOOMKIT_SERVER:-$ROOT/build/release/server/bloomkit-server}}
NAME=bench_module.sh
. "$ROOT/bench/lib.sh"
need redis-benchmark redis-server redis-cli
need_module
need_server

start_pair bkm-bench --appendonly no --loadmodule "$MOD"

for p in "$BK_PORT" "$RS_PORT"; do
    [ "$(redis-cli -p "$p" BF.RESERVE bf 0.01 20000000)" = OK ] ||
        { echo "bench_module.sh: BF.RESERVE failed on port $p" >&2; exit 1; }
done


echo "module: $MOD in redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'); bloomkit-server: $BKS (threads: $ST, 0 = one per core)"
table_head
for P in 1 64; do
    if [ $P = 1 ]; then n=$N; else n=$NP; fi
    bench "redis-server SET"                 "$RS_PORT" $P $n 1 -t set
    bench "redis-server+module BF.ADD"       "$RS_PORT" $P $n 1 BF.ADD bf __rand_int__
    bench "bloomkit-server BF.ADD"           "$BK_PORT" $P $n 1 BF.ADD bf __rand_int__
    bench "redis-server+module BF.EXISTS"    "$RS_PORT" $P $n 1 BF.EXISTS bf __rand_int__
    bench "bloomkit-server BF.EXISTS"        "$BK_PORT" $P $n 1 BF.EXISTS bf __rand_int__
done
# shellcheck disable=SC2086
bench "redis-server+module BF.MADD x100"     "$RS_PORT" 1 "$NM" 100 BF.MADD bf $MADD_ARGS
# shellcheck disable=SC2086
bench "bloomkit-server BF.MADD x100"         "$BK_PORT" 1 "$NM" 100 BF.MADD bf $MADD_ARGS
# shellcheck disable=SC2086
bench "redis-server+module BF.MEXISTS x100"  "$RS_PORT" 1 "$NM" 100 BF.MEXISTS bf $MADD_ARGS
# shellcheck disable=SC2086
bench "bloomkit-server BF.MEXISTS x100"      "$BK_PORT" 1 "$NM" 100 BF.MEXISTS bf $MADD_ARGS
echo
echo "command: $0 $*  (N=$N NP=$NP NM=$NM CLIENTS=$CLIENTS BENCH_THREADS=$BT SERVER_THREADS=$ST)"
