#!/bin/sh
# bench_keys.sh - what a small BF key costs (issue 29): KEYS keys of ITEMS
# items each, made by BF.ADD in a pipeline (one filter per user or tenant),
# in bloomkit-server and in Debian's redis-server with bloomkit.so, beside
# RedisBloom 2.6.28 in Redis 7.0 as measured in the issue (it cannot be
# built here: its row is the issue's numbers, not this run's).
#
# Usage: bench/bench_keys.sh [path/to/bloomkit-server] [path/to/bloomkit.so]
#   env: KEYS (default 20000), ITEMS (default 10), REDIS_SERVER (default
#        /usr/bin/redis-server, installed by scripts/install-deps.sh when
#        missing)
#
# Each server starts on a free loopback port with a temporary directory
# (bloomkit-server with its defaults, redis-server without persistence)
# and is stopped at the end. Per key, after the adds settle: the growth of
# INFO used_memory and of the process's RSS (/proc/PID/statm), and MEMORY
# USAGE of one of the keys.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BKS=${1:-${BLOOMKIT_SERVER:-$ROOT/build/release/server/bloomkit-server}}
MOD=${2:-${BLOOMKIT_MODULE:-$ROOT/build/release/module/bloomkit.so}}
REDIS_SERVER=${REDIS_SERVER:-/usr/bin/redis-server}

if [ ! -x "$REDIS_SERVER" ] || [ ! -x /usr/bin/python3 ]; then
    "$ROOT/scripts/install-deps.sh"
fi
[ -x "$REDIS_SERVER" ] || { echo "bench_keys.sh: no redis-server at $REDIS_SERVER" >&2; exit 1; }
[ -x "$BKS" ] || { echo "bench_keys.sh: no server at $BKS (make build)" >&2; exit 1; }
[ -f "$MOD" ] || { echo "bench_keys.sh: no module at $MOD (make build)" >&2; exit 1; }
MOD=$(cd "$(dirname "$MOD")" && pwd)/$(basename "$MOD")

export BKS MOD REDIS_SERVER ROOT
exec /usr/bin/python3 - <<'EOF'
import os
import sys
import time

ROOT = os.environ["ROOT"]
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import harness  # noqa: E402
import test_keys_memory as km  # noqa: E402  (the test's pipeline and RSS reader)

KEYS = int(os.environ.get("KEYS", "20000"))
ITEMS = int(os.environ.get("ITEMS", "10"))


def settled(r):
    """used_memory holding still (Redis rehashing its keyspace, a closing
    connection's buffers), at most 10 s."""
    last, deadline = None, time.time() + 10
    while time.time() < deadline:
        now = r.info("memory")["used_memory"]
        if now == last:
            return
        last = now
        time.sleep(0.3)


def measure(label, srv):
    r = srv.client()
    settled(r)
    u0, s0 = r.info("memory")["used_memory"], km.rss_bytes(srv)
    t = time.time()
    km.pipeline_adds(srv, 0, KEYS, items=ITEMS)
    took = time.time() - t
    settled(r)
    u1, s1 = r.info("memory")["used_memory"], km.rss_bytes(srv)
    usage = r.execute_command("MEMORY", "USAGE", km.key_name(KEYS // 2))
    print("| %-32s | %8.1f | %8.1f | %6d | %6.2f |"
          % (label, (u1 - u0) / KEYS, (s1 - s0) / KEYS, usage, took))


print("%d keys x %d items, BF.ADD pipelined (%d commands)\n" % (KEYS, ITEMS, KEYS * ITEMS))
print("| %-32s | %8s | %8s | %6s | %6s |"
      % ("host", "used B/k", "RSS B/k", "MEM US", "adds s"))
print("|%s|---------:|---------:|-------:|-------:|" % ("-" * 34))
print("| %-32s | %8d | %8s | %6d | %6s |"
      % ("RedisBloom 2.6.28, Redis 7.0 *", 351, "-", 272, "-"))

harness.SERVER, harness.MODULE = os.environ["BKS"], None
with harness.Server() as srv:
    measure("bloomkit-server", srv)
    srv.stop()

harness.MODULE, harness.REDIS_SERVER = os.environ["MOD"], os.environ["REDIS_SERVER"]
with harness.Server() as srv:
    measure("redis-server + bloomkit.so", srv)
    srv.stop()

print("\n* the issue's measure (20,000 keys x 10 items); RedisBloom cannot be "
      "built here.\n  used B/k, RSS B/k: growth per key; MEM US: MEMORY USAGE "
      "of one key.")
EOF
