# bench/lib.sh - what the server benchmarks share; sourced, never run.
# The sourcing script sets NAME (its file name, for messages) first, and
# BKS (bloomkit-server) and MOD (bloomkit.so) where it uses them.
#
#   CLIENTS, BT, ST    redis-benchmark -c (env CLIENTS, 50) and --threads
#                      (env BENCH_THREADS, 2); bloomkit-server --threads
#                      (env SERVER_THREADS, 0: one per core)
#   N, NP, NM          requests of a row without pipelining, with one, and
#                      of the MADD rows (env N, NP, NM; 200000, 2000000,
#                      20000 unless the script set its own before)
#   need TOOL...       exit with a message when a program is missing
#   need_server        exit unless $BKS is an executable
#   need_module        exit unless $MOD is a file; make MOD absolute
#                      (redis-server enters --dir before it loads modules)
#   scratch TEMPLATE   TMP=a new /tmp/TEMPLATE.XXXXXX; at exit (also on
#                      failure or Ctrl-C) the servers started below are
#                      stopped and TMP removed
#   start_bloomkit DIR PORT [FLAG...]
#                      $BKS on PORT with data in DIR, log DIR.log, ready
#   start_redis DIR PORT [FLAG...]
#                      redis-server on loopback PORT in DIR without
#                      snapshots (FLAGs: the rest), log DIR/log, ready
#   start_pair TEMPLATE [FLAG...]
#                      scratch TEMPLATE, then $BKS on BK_PORT and
#                      redis-server on RS_PORT (FLAGs: its others), two
#                      free loopback ports, both ready
#   stop_servers       stop the servers started so far
#   free_port          print a free loopback TCP port
#   wait_ping PORT     wait (up to 10 s) until redis-cli PING answers PONG
#   bench LABEL PORT PIPELINE REQUESTS ITEMS_PER_COMMAND cmd...
#                      one redis-benchmark row (-c $CLIENTS --threads $BT,
#                      random items): | label | -P | req/s | items/s | p50 | p99 |
#   table_head         the machine line and the head of the table of
#                      bench rows
#   MADD_ARGS          100 random items, for the MADD rows

need() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null ||
            { echo "$NAME: $tool is missing (scripts/install-deps.sh --bench)" >&2; exit 1; }
    done
}

N=${N:-200000}
NP=${NP:-2000000}
NM=${NM:-20000}
CLIENTS=${CLIENTS:-50}
BT=${BENCH_THREADS:-2}
ST=${SERVER_THREADS:-0}

need_server() {
    [ -x "$BKS" ] || { echo "$NAME: no server at $BKS (make build)" >&2; exit 1; }
}

need_module() {
    [ -f "$MOD" ] || { echo "$NAME: no module at $MOD (make build)" >&2; exit 1; }
    MOD=$(cd "$(dirname "$MOD")" && pwd)/$(basename "$MOD")
}

PIDS=""
stop_servers() {
    for p in $PIDS; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
    PIDS=""
}

scratch() {
    TMP=$(mktemp -d "/tmp/$1.XXXXXX")
    trap 'stop_servers; rm -rf "$TMP"' EXIT
    trap 'exit 130' INT TERM
}

free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_ping() {
    i=0
    until [ "$(redis-cli -p "$1" PING 2>/dev/null)" = PONG ]; do
        i=$((i + 1))
        [ $i -gt 200 ] && { echo "$NAME: server on port $1 did not start" >&2; exit 1; }
        sleep 0.05
    done
}

start_bloomkit() {
    dir=$1 port=$2
    shift 2
    mkdir -p "$dir"
    "$BKS" --port "$port" --dir "$dir" --threads "$ST" --loglevel warning "$@" \
        >"$dir.log" 2>&1 &
    PIDS="$PIDS $!"
    wait_ping "$port"
}

start_redis() {
    dir=$1 port=$2
    shift 2
    mkdir -p "$dir"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
        --daemonize no --logfile "$dir/log" "$@" &
    PIDS="$PIDS $!"
    wait_ping "$port"
}

start_pair() {
    scratch "$1"
    shift
    BK_PORT=$(free_port)
    RS_PORT=$(free_port)
    start_bloomkit "$TMP/bk" "$BK_PORT"
    start_redis "$TMP/rs" "$RS_PORT" "$@"
}

table_head() {
    echo "machine: $(nproc) cores; redis-benchmark -c $CLIENTS --threads $BT -r 100000000"
    echo
    echo "| test                               |  -P |       req/s  |     items/s  | p50 ms  | p99 ms  |"
    echo "|------------------------------------|-----|--------------|--------------|---------|---------|"
}

bench() {
    label=$1 port=$2 pipe=$3 n=$4 items=$5
    shift 5
    line=$(timeout 300 redis-benchmark -p "$port" -c "$CLIENTS" -n "$n" -P "$pipe" \
           --threads "$BT" -r 100000000 --csv "$@" 2>/dev/null | tail -n 1)
    # "name","rps","avg","min","p50","p95","p99","max"
    echo "$line" | tr -d '"' | awk -F, -v l="$label" -v p="$pipe" -v it="$items" \
        '{ printf "| %-34s | %3s | %12.0f | %12.0f | %7s | %7s |\n", l, p, $2, $2 * it, $5, $7 }'
}

MADD_ARGS=""
_madd_i=0
while [ $_madd_i -lt 100 ]; do MADD_ARGS="$MADD_ARGS __rand_int__"; _madd_i=$((_madd_i + 1)); done
