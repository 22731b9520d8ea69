#!/bin/sh
# bench_vs_get.sh - issue 30's bar: BF.* and CF.* rates of bloomkit-server
# and of bloomkit.so inside Redis, each as a fraction of Debian
# redis-server's GET of one fixed key measured in the same run (RedisBloom
# cannot be built here; the issue gives its rates as fractions of that GET).
#
# Usage: bench/bench_vs_get.sh [path/to/bloomkit-server] [path/to/bloomkit.so]
#   env: NP (requests per -P64 row, default 2000000), N1 (requests per -P1
#        row, default 200000), BENCH_THREADS (redis-benchmark --threads, 2),
#        SERVER_THREADS (bloomkit-server --threads, 0 = one per core),
#        ONLY (server | module: run one half)
#
# Three processes on free loopback ports, every one logging writes:
#   bloomkit-server with its defaults (append-only log, fsync every second);
#   redis-server --appendonly yes --appendfsync everysec (the GET stand-in
#     of the server rows);
#   redis-server with bloomkit.so, the same log settings (its own GET is the
#     stand-in of the module rows).
# Filters: "bfr" BF.RESERVE 0.01 1e8, "bfd" made by the first BF.ADD (the
# default path, grows), "cf" CF.RESERVE 2e7; items random (-r 1e8).
#
# Output: a table a host: req/s, the ratio to that host's GET, the target
# (issue 30) and a verdict, under the ceiling (PING to the host: the most
# the client sends it here); then p50/p99 at -P1 -c50 against GET's.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BKS=${1:-${BLOOMKIT_SERVER:-$ROOT/build/release/server/bloomkit-server}}
MOD=${2:-${BLOOMKIT_MODULE:-$ROOT/build/release/module/bloomkit.so}}
NP=${NP:-2000000}
N1=${N1:-200000}
ONLY=${ONLY:-}

NAME=bench_vs_get.sh
. "$ROOT/bench/lib.sh"
need redis-benchmark redis-server redis-cli
need_server
need_module

scratch bk-vsget

setup() { # PORT
    r=$(redis-cli -p "$1" BF.RESERVE bfr 0.01 100000000)
    r="$r $(redis-cli -p "$1" CF.RESERVE cf 20000000)"
    r="$r $(redis-cli -p "$1" BF.ADD bfd first)"
    [ "$r" = "OK OK 1" ] || { echo "bench_vs_get.sh: setup on port $1 answered: $r" >&2; exit 1; }
}

# rate PORT PIPE CLIENTS N cmd... -> "rps p50 p99"
# The rate is N over the wall time of the run, taken here: with --threads,
# redis-benchmark finds the end of a run on a 250 ms tick and reports
# N / (elapsed rounded up to it), a 12% step at 2M/s for 4e6 requests.
# (The wall time also holds connecting the clients: a few ms, alike for
# every row.)
rate() {
    port=$1 pipe=$2 c=$3 n=$4
    shift 4
    t0=$(date +%s%N)
    out=$(timeout 300 redis-benchmark -p "$port" -c "$c" -n "$n" -P "$pipe" \
        --threads "$BT" -r 100000000 --csv "$@" 2>/dev/null | tail -n 1 | tr -d '"')
    t1=$(date +%s%N)
    echo "$out" | awk -F, -v n="$n" -v ns=$((t1 - t0)) '{ printf "%.0f %s %s\n", n / (ns / 1e9), $5, $7 }'
}

# wait_idle PORT: until INFO persistence shows no snapshot child and no
# log rewrite (at most 300 s) -> "waited N s for a background save"
wait_idle() {
    w=0
    while [ $w -lt 300 ]; do
        busy=$(redis-cli -p "$1" INFO persistence | tr -d '\r' |
            awk -F: '/^(rdb_bgsave|aof_rewrite)_in_progress:/ { b += $2 } END { print b + 0 }')
        [ "$busy" = 0 ] && break
        sleep 1
        w=$((w + 1))
    done
    echo "waited $w s for a background save"
}

# host LABEL PORT GETPORT T1 ... T6 (targets as fractions of GET)
host() {
    label=$1 port=$2 gport=$3
    shift 3
    redis-cli -p "$gport" SET fixed somevalue >/dev/null
    get=$(rate "$gport" 64 20 "$NP" GET fixed | cut -d' ' -f1)
    # the ceiling: PING does no work in the host, so its rate is what
    # redis-benchmark can send this host on this machine (the client and
    # the host share its cores); no row can be measured above it
    ping=$(rate "$port" 64 20 "$NP" PING | cut -d' ' -f1)
    echo
    echo "$label, -P64 -c20; GET = $get req/s (redis-server, GET of one fixed key)"
    echo "$ping $get" | awk '{ printf "ceiling: PING to this host = %.0f req/s = %.2f x GET\n", $1, $1 / $2 }'
    echo
    echo "| command                | req/s      | / GET | target | verdict |"
    echo "|------------------------|-----------:|------:|-------:|---|"
    for row in "BF.ADD reserved|BF.ADD bfr __rand_int__" \
               "BF.EXISTS reserved|BF.EXISTS bfr __rand_int__" \
               "BF.ADD default path|BF.ADD bfd __rand_int__" \
               "BF.EXISTS default path|BF.EXISTS bfd __rand_int__" \
               "CF.ADD reserved|CF.ADD cf __rand_int__" \
               "CF.EXISTS reserved|CF.EXISTS cf __rand_int__"; do
        name=${row%%|*}
        cmd=${row#*|}
        t=$1
        shift
        # shellcheck disable=SC2086
        r=$(rate "$port" 64 20 "$NP" $cmd | cut -d' ' -f1)
        echo "$r $get $t" | awk -v n="$name" '{ q = $1 / $2;
            printf "| %-22s | %10.0f | %5.2f | %6.2f | %s |\n", n, $1, q, $3, (q >= $3) ? "ok" : "MISSED" }'
    done
    # a snapshot or log rewrite the -P64 writes started (a fork) would be
    # measured below as these commands' latency: wait for it to end
    idle=$(wait_idle "$port")
    echo
    echo "$label, -P1 -c50, latency against GET's (target: within 1.1x; $idle)"
    echo
    echo "| command   | req/s  | p50 ms | p99 ms | p50 / GET | p99 / GET | verdict |"
    echo "|-----------|-------:|-------:|-------:|----:|----:|---|"
    g=$(rate "$gport" 1 50 "$N1" GET fixed)
    echo "$g" | awk '{ printf "| GET       | %6.0f | %6s | %6s |     |     |   |\n", $1, $2, $3 }'
    for row in "BF.ADD|BF.ADD bfr __rand_int__" "BF.EXISTS|BF.EXISTS bfr __rand_int__" \
               "CF.ADD|CF.ADD cf __rand_int__" "CF.EXISTS|CF.EXISTS cf __rand_int__"; do
        name=${row%%|*}
        cmd=${row#*|}
        # shellcheck disable=SC2086
        r=$(rate "$port" 1 50 "$N1" $cmd)
        echo "$name $r $g" | awk '{ a = $3 / $6; b = $4 / $7;
            printf "| %-9s | %6.0f | %6s | %6s | %4.2f | %4.2f | %s |\n", $1, $2, $3, $4, a, b,
                   (a <= 1.1 && b <= 1.1) ? "ok" : "MISSED" }'
    done
}

echo "bloomkit-server: $BKS (threads: $ST, 0 = one per core); module: $MOD"
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'); machine: $(nproc) cores; redis-benchmark --threads $BT -r 100000000"

if [ "$ONLY" != module ]; then
    BK_PORT=$(free_port)
    start_bloomkit "$TMP/bk" "$BK_PORT"
    RS_PORT=$(free_port)
    start_redis "$TMP/rs" "$RS_PORT" --appendonly yes --appendfsync everysec
    setup "$BK_PORT"
    host "bloomkit-server" "$BK_PORT" "$RS_PORT" 1.16 1.30 0.60 0.70 1.48 1.40
    stop_servers
fi
if [ "$ONLY" != server ]; then
    RM_PORT=$(free_port)
    start_redis "$TMP/rm" "$RM_PORT" --appendonly yes --appendfsync everysec --loadmodule "$MOD"
    setup "$RM_PORT"
    host "redis-server + bloomkit.so" "$RM_PORT" "$RM_PORT" 0.70 0.78 0.36 0.42 0.89 0.84
fi
echo
echo "command: $0 $*  (NP=$NP N1=$N1 BENCH_THREADS=$BT SERVER_THREADS=$ST ONLY=$ONLY)"
