#!/usr/bin/python3
"""bloomkit.so: many small BF keys cost no more than RedisBloom's (issue 29).

tests/server/test_keys_memory.py's measure inside Redis 7: 20,000 keys of
10 items each, made by BF.ADD in a pipeline, grow used_memory by at most
RedisBloom's 351 bytes per key (the values and filters are allocated
through Redis, so used_memory sees all of them), MEMORY USAGE of one is
within 10% of that growth, and, unsanitised, RSS agrees. Deleting keys
gives back what MEMORY USAGE said they cost (within 10%).

Run: /usr/bin/python3 tests/module/test_keys_memory.py (BLOOMKIT_MODULE, and
REDIS_SERVER if not /usr/bin/redis-server). Prints "N passed, M failed".
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
from harness import Runner, Server  # noqa: E402
import test_keys_memory as km  # noqa: E402  (tests/server, on the path via modutil)


def small_keys():
    with Server() as srv:
        r = srv.client()
        km.check_per_key(srv, r, check_rss=not km.SANITIZED)
        # Redis's first DEL makes a block of its own (48 KiB here, once):
        # not a key's, so made before the measure
        assert r.delete(km.key_name(km.KEYS - 1)) == 1
        settled(r)
        names = [km.key_name(i) for i in range(1000)]
        usage = sum(r.execute_command("MEMORY", "USAGE", n) for n in names)
        before = dataset(r)
        for i in range(0, len(names), 50):
            assert r.delete(*names[i:i + 50]) == 50
        freed = before - dataset(r)
        # all but the key's pointer in the keyspace's bucket array, which
        # does not shrink
        assert abs(freed - usage) <= 0.10 * usage, (freed, usage)


def settled(r, timeout=30):
    """Wait until used_memory holds still: Redis has finished moving its
    keyspace to the table it grew into (incremental rehashing keeps both
    meanwhile) and has let go of the pipelining connection."""
    deadline = time.time() + timeout
    last = None
    while True:
        now = dataset(r), r.execute_command("DEBUG", "HTSTATS", 0)
        if now == last and b"Hash table 1" not in now[1]:
            return
        assert time.time() < deadline, "used_memory does not settle"
        last = now
        time.sleep(0.2)


def dataset(r):
    """used_memory without the clients' buffers (a DEL of many names grows
    its query buffer, which used_memory counts)."""
    info = r.info("memory")
    return info["used_memory"] - info["mem_clients_normal"]


if __name__ == "__main__":
    run = Runner("module keys_memory")
    run.check("20000 small BF keys: used_memory, RSS, MEMORY USAGE", small_keys)
    run.finish()
