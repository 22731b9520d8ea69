#!/usr/bin/python3
"""Many small BF keys cost no more than RedisBloom's (issue 29).

20,000 keys of 10 items each, made by BF.ADD in a pipeline (one key per
user or tenant, the common Redis pattern). RedisBloom 2.6 in Redis 7.0
grows used_memory by 351 bytes per such key; here:
  - used_memory grows by at most that per key;
  - MEMORY USAGE of one of them is within 10% of the measured growth per
    key (it reports what a key costs, not a nominal size);
  - unsanitised, RSS grows by at most that per key too and agrees with
    used_memory within 10% (used_memory counts real allocator blocks);
  - the accounting is exact: deleting keys takes off the bytes MEMORY USAGE
    reported for them, an expiry's block is counted where it is added, and
    FLUSHALL brings used_memory back to 0.
tests/module/test_keys_memory.py runs the first checks inside Redis.

Run: /usr/bin/python3 tests/server/test_keys_memory.py (BLOOMKIT_SERVER).
Prints "N passed, M failed".
"""
import os
import time

from harness import Runner, Server

KEYS = 20000
ITEMS = 10
REDISBLOOM_BYTES_PER_KEY = 351  # RedisBloom 2.6.28 in Redis 7.0 (issue 29)
SANITIZED = os.environ.get("BKS_SANITIZED") is not None


def key_name(i):
    return "user:%05d" % i


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def pipeline_adds(srv, first, count, items=ITEMS, batch=1000, command="BF.ADD",
                  prefix="", reply=b":1"):
    """BF.ADD key item-j for count keys from first, items each, pipelined
    on one connection in batches; every reply must be :1 (new). (With
    command BF.EXISTS, prefix and reply :0: the same traffic on keys that
    do not exist.)"""
    sock = srv.raw(timeout=120)
    try:
        for lo in range(first, first + count, batch):
            hi = min(lo + batch, first + count)
            sock.sendall(b"".join(resp(command, prefix + key_name(i), "item-%d" % j)
                                  for i in range(lo, hi) for j in range(items)))
            want, got, buf = (hi - lo) * items, 0, b""
            while got < want:
                data = sock.recv(1 << 20)
                assert data, "the server closed the connection"
                buf += data
                got = buf.count(b"\r\n")
            lines = buf.split(b"\r\n")[:-1]
            assert len(lines) == want and all(ln == reply for ln in lines), lines[:3]
    finally:
        sock.close()


def rss_bytes(srv):
    with open("/proc/%d/statm" % srv.proc.pid) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def used(r):
    return r.info("memory")["used_memory"]


def measure(srv, r):
    """(used_memory growth, RSS growth, MEMORY USAGE) per key of KEYS keys.
    The same pipelined traffic on absent keys first: the connection's
    buffers reach their peak before RSS is read (they are not the keys'
    memory, and how far they grew in the measured run varied by 6 B a key,
    which took RSS past the 10% bound now and then)."""
    pipeline_adds(srv, 0, KEYS, command="BF.EXISTS", prefix="absent:", reply=b":0")
    time.sleep(0.1)
    u0, s0 = used(r), rss_bytes(srv)
    pipeline_adds(srv, 0, KEYS)
    time.sleep(0.1)
    u1, s1 = used(r), rss_bytes(srv)
    usage = r.execute_command("MEMORY", "USAGE", key_name(KEYS // 2))
    per_key, rss_per_key = (u1 - u0) / KEYS, (s1 - s0) / KEYS
    print("    %d keys x %d items: used_memory +%.1f B/key, RSS +%.1f B/key, "
          "MEMORY USAGE %d B (RedisBloom: %d B/key)"
          % (KEYS, ITEMS, per_key, rss_per_key, usage, REDISBLOOM_BYTES_PER_KEY))
    return per_key, rss_per_key, usage


def check_per_key(srv, r, check_rss):
    """The checks both hosts share (the module test calls this)."""
    per_key, rss_per_key, usage = measure(srv, r)
    assert r.dbsize() == KEYS
    assert per_key <= REDISBLOOM_BYTES_PER_KEY, per_key
    assert abs(usage - per_key) <= 0.10 * per_key, (usage, per_key)
    if check_rss:
        assert rss_per_key <= REDISBLOOM_BYTES_PER_KEY, rss_per_key
        assert abs(rss_per_key - per_key) <= 0.10 * per_key, (rss_per_key, per_key)


def small_keys():
    with Server() as srv:
        r = srv.client()
        check_per_key(srv, r, check_rss=not SANITIZED)
        exact_accounting(r)
        assert srv.stop() == 0


def exact_accounting(r):
    # deleting keys takes off exactly what they were counted for (MEMORY
    # USAGE adds the key's bucket pointer, which stays in the table)
    names = [key_name(i) for i in range(100)]
    usages = [r.execute_command("MEMORY", "USAGE", n) for n in names]
    before = used(r)
    assert r.delete(*names) == len(names)
    assert before - used(r) == sum(u - 8 for u in usages), (before - used(r), sum(usages))
    # a key's first expiry is a block of its own, counted in both
    name = key_name(200)
    u0, m0 = used(r), r.execute_command("MEMORY", "USAGE", name)
    assert r.expire(name, 3600)
    grew = r.execute_command("MEMORY", "USAGE", name) - m0
    assert grew > 0 and used(r) - u0 == grew, (grew, used(r) - u0)
    assert r.persist(name) and r.ttl(name) == -1
    # a growing key is counted as it grows
    u0, m0 = used(r), r.execute_command("MEMORY", "USAGE", name)
    r.execute_command("BF.MADD", name, *["more-%d" % i for i in range(2000)])
    grew = r.execute_command("MEMORY", "USAGE", name) - m0
    assert grew > 0 and used(r) - u0 == grew, (grew, used(r) - u0)
    # nothing is left over: keys, expiry blocks and bucket arrays
    r.flushall()
    assert used(r) == 0, used(r)


def renamed_key():
    """RENAME moves the value and its expiry into an entry of another name
    length: counted as what it is afterwards."""
    with Server() as srv:
        r = srv.client()
        r.execute_command("BF.ADD", "a", "x")
        r.expire("a", 3600)
        r.rename("a", "a-much-longer-name-than-before-so-a-larger-entry")
        name = "a-much-longer-name-than-before-so-a-larger-entry"
        assert r.ttl(name) > 0
        mu = r.execute_command("MEMORY", "USAGE", name)
        r.execute_command("BF.ADD", "b", "x")
        assert mu > r.execute_command("MEMORY", "USAGE", "b")
        r.delete("b")
        assert used(r) - mu + 8 < 4096  # only the bucket arrays besides it
        r.delete(name)
        r.flushall()
        assert used(r) == 0
        assert srv.stop() == 0


if __name__ == "__main__":
    run = Runner("keys_memory")
    run.check("20000 small BF keys: used_memory, RSS, MEMORY USAGE", small_keys)
    run.check("RENAME recounts the key", renamed_key)
    run.finish()
