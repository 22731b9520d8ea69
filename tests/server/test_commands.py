#!/usr/bin/python3
"""BF.* / CF.* through redis-py's bf() and cf() helpers against bloomkit-server.

Run with Debian's interpreter (python3-redis 4.3.4):
    /usr/bin/python3 tests/server/test_commands.py
Uses tests/server/harness.py (the server engineer's) to start the server on
a free port in a temporary directory. Prints "N passed, M failed" and exits
non-zero on any failure; exits 2 when the harness or server is unavailable.
"""
import os
import sys
import functools

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import redis  # noqa: E402
from redis.exceptions import ResponseError  # noqa: E402

from harness import expect_error  # noqa: E402


TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


@test
def bf_basic(r):
    bf = r.bf()
    assert bf.create("bf:a", 0.01, 1000) in (True, b"OK", "OK")
    expect_error(lambda: bf.create("bf:a", 0.01, 1000), "item exists")
    assert bf.add("bf:a", "x") == 1
    assert bf.add("bf:a", "x") == 0
    assert bf.madd("bf:a", "y", "z", "x") == [1, 1, 0]
    assert bf.exists("bf:a", "y") == 1
    assert bf.exists("bf:a", "nope") == 0
    assert bf.mexists("bf:a", "x", "nope") == [1, 0]
    assert bf.exists("bf:missing", "x") == 0
    assert r.execute_command("BF.CARD", "bf:a") == 3
    info = bf.info("bf:a")
    assert info.capacity == 1000 and info.filterNum == 1 and info.insertedNum == 3
    assert info.expansionRate == 2 and info.size > 0
    plain = redis.Redis(connection_pool=r.connection_pool)  # no BF.INFO callback
    assert plain.execute_command("BF.INFO", "bf:a", "CAPACITY") == [1000]
    expect_error(lambda: bf.info("bf:missing"), "not found")
    expect_error(lambda: bf.create("bf:b", 2, 10), "(0 < error rate range < 1) ")


@test
def bf_insert_nonscaling(r):
    bf = r.bf()
    assert bf.insert("bf:i", ["a", "b"], capacity=100, error=0.001) == [1, 1]
    expect_error(lambda: bf.insert("bf:none", ["a"], noCreate=True), "not found")
    bf.create("bf:ns", 0.01, 2, noScale=True)
    res = r.execute_command("BF.INSERT", "bf:ns", "ITEMS", "a", "b", "c")
    assert res[:2] == [1, 1], res
    assert isinstance(res[2], ResponseError) and str(res[2]) == "non scaling filter is full"
    assert bf.info("bf:ns").expansionRate is None


@test
def bf_scandump_loadchunk(r):
    bf = r.bf()
    bf.create("bf:src", 0.01, 100)
    bf.madd("bf:src", *["item%d" % i for i in range(300)])
    from harness import bf_copy_by_chunks
    bf_copy_by_chunks(bf, "bf:src", "bf:dst")
    assert bf.mexists("bf:dst", "item0", "item299") == [1, 1]
    assert bf.info("bf:dst").insertedNum == bf.info("bf:src").insertedNum
    expect_error(lambda: bf.loadchunk("bf:bad", 99, b"xyz"), "chunk out of order")


@test
def bf_wrongtype_and_merge(r):
    r.cf().add("cf:w", "x")
    expect_error(lambda: r.bf().add("cf:w", "x"),
                 "WRONGTYPE Operation against a key holding the wrong kind of value")
    assert r.bf().exists("cf:w", "x") == 0
    bf = r.bf()
    bf.create("m:a", 0.01, 100)
    bf.create("m:b", 0.01, 100)
    bf.add("m:a", "1")
    bf.add("m:b", "2")
    assert r.execute_command("BF.MERGE", "m:a", "m:b") in (b"OK", "OK", True)
    assert bf.mexists("m:a", "1", "2") == [1, 1]


@test
def cf_basic(r):
    cf = r.cf()
    assert cf.create("cf:a", 1000) in (True, b"OK", "OK")
    assert cf.add("cf:a", "x") == 1
    assert cf.add("cf:a", "x") == 1
    assert cf.count("cf:a", "x") == 2
    assert cf.addnx("cf:a", "x") == 0
    assert cf.addnx("cf:a", "y") == 1
    assert cf.exists("cf:a", "y") == 1
    assert cf.exists("cf:a", "nope") == 0
    assert cf.delete("cf:a", "x") == 1
    assert cf.count("cf:a", "x") == 1
    assert cf.insert("cf:a", ["p", "q"]) == [1, 1]
    assert cf.insertnx("cf:a", ["p", "r"]) == [0, 1]
    info = cf.info("cf:a")
    assert info.bucketSize == 2 and info.maxIteration == 20 and info.expansionRate == 1
    assert (info.insertedNum, info.deletedNum, info.filterNum) == (5, 1, 1), vars(info)
    expect_error(lambda: cf.delete("cf:missing", "x"), "Not found")
    expect_error(lambda: cf.create("cf:small", 3), "Capacity must be at least (BucketSize * 2)")


@test
def cf_full_and_dump(r):
    cf = r.cf()
    r.execute_command("CF.RESERVE", "cf:f", 4, "EXPANSION", 0)
    full = False
    for i in range(100):
        try:
            cf.add("cf:f", "i%d" % i)
        except ResponseError as e:
            assert str(e) == "Filter is full"
            full = True
            break
    assert full
    assert cf.insert("cf:f", ["zz"]) == [-1]
    cf.create("cf:src", 64)
    for i in range(200):
        cf.add("cf:src", "k%d" % i)
    it = 0
    while True:
        it, data = cf.scandump("cf:src", it)
        if it == 0:
            break
        cf.loadchunk("cf:dst", it, data)
    assert cf.exists("cf:dst", "k0") == 1 and cf.exists("cf:dst", "k199") == 1


@test
def cf_many_stages_size(r):
    """CF.RESERVE k 50, then CF.ADD until RedisBloom's 32 stages (the
    bench_grow row): no more bytes than RedisBloom 2.6.28's 2,600."""
    r.execute_command("CF.RESERVE", "cf:grow", 50)
    added = 0
    while True:
        try:
            r.execute_command("CF.ADD", "cf:grow", "key:%d" % added)
        except ResponseError as e:
            assert str(e) in ("Maximum expansions reached", "ERR Maximum expansions reached"), str(e)
            break
        added += 1
        assert added < 4000
    info = r.cf().info("cf:grow")
    assert (info.filterNum, info.bucketNum, info.insertedNum) == (32, 32 * 32, added), vars(info)
    assert info.size <= 2600, info.size
    # MEMORY USAGE is what the key costs: its blocks as the allocator
    # rounds them (jemalloc's size classes, inside Redis, add up to 25%)
    # and the host's per-key overhead (a RedisBloom key's is 111 bytes
    # beyond its filter, issue 29): RedisBloom's 2,600 bytes counted so
    usage = r.memory_usage("cf:grow")
    assert usage <= 2600 * 5 // 4 + 111, usage
    assert r.cf().mexists("cf:grow", "key:0", "key:%d" % (added - 1)) == [1, 1]


@test
def cf_info_waste_note(r):
    """A capacity whose power-of-two table is under 60% used at capacity:
    CF.INFO has one more pair, and redis-py's CFInfo still reads the rest."""
    cf = r.cf()
    cf.create("cf:waste", 1100)
    info = cf.info("cf:waste")
    assert (info.bucketNum, info.filterNum, info.bucketSize, info.maxIteration) == (1024, 1, 2, 20)
    plain = redis.Redis(connection_pool=r.connection_pool)  # no CF callbacks
    raw = plain.execute_command("CF.INFO", "cf:waste")
    pairs = dict(zip(raw[::2], raw[1::2]))
    note = pairs.get(b"Warning", pairs.get("Warning"))
    assert note is not None and note.startswith(b"capacity 1100 fills 53% of 2048 slots"), raw
    cf.create("cf:nowaste", 1000)
    assert len(plain.execute_command("CF.INFO", "cf:nowaste")) == 16


@test
def cf_old_stage_list(r):
    """A CF.SCANDUMP made before CF keys held one filter of stages (four
    separate images, tests/golden/cf-chain-v1.bkcv) loads as one filter."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "golden", "cf-chain-v1.bkcv"), "rb") as fp:
        data = fp.read()
    cf = r.cf()
    cf.loadchunk("cf:old", len(data), data)
    info = cf.info("cf:old")
    assert (info.filterNum, info.bucketNum, info.insertedNum, info.deletedNum) == (4, 480, 381, 10), vars(info)
    assert info.size == 1064, info.size  # RedisBloom's: 40 + 4 x 16 + 480 x 2 (issue 31)
    kept = ["item:%d" % i for i in range(390) if not (i < 40 and i % 4 == 0)]
    assert cf.mexists("cf:old", *kept) == [1] * len(kept)
    it, chunk = cf.scandump("cf:old", 0)
    assert len(chunk) < len(data)  # one image now


@test
def our_additions(r):
    assert r.execute_command("CBF.ADD", "c:1", "a") == 1
    assert r.execute_command("CBF.ADD", "c:1", "a") == 0
    assert r.execute_command("CBF.COUNT", "c:1", "a") == 2
    assert r.execute_command("CBF.DEL", "c:1", "a") == 1
    assert r.execute_command("WF.RESERVE", "w:1", "0.01", "1000", "60000") in (b"OK", "OK", True)
    assert r.execute_command("WF.ADD", "w:1", "a") == 1
    assert r.execute_command("WF.EXISTS", "w:1", "a") == 1
    assert r.execute_command("TYPE", "w:1") in (b"bkwindow-", "bkwindow-")


def main():
    from harness import run_steps

    def step(fn):
        @functools.wraps(fn)
        def run(srv, r):
            fn(r)
        return run
    return run_steps([step(fn) for fn in TESTS])


if __name__ == "__main__":
    sys.exit(main())
