# bench/lib.sh - what the server benchmarks share; sourced, never run.
# The sourcing script sets NAME (its file name, for messages) first.
#
#   need TOOL...       exit with a message when a program is missing
#   free_port          print a free loopback TCP port
#   wait_ping PORT     wait (up to 10 s) until redis-cli PING answers PONG

need() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null ||
            { echo "$NAME: $tool is missing (scripts/install-deps.sh --bench)" >&2; exit 1; }
    done
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
