#!/usr/bin/python3
"""CF keys speak RedisBloom's dialect (issue 31): every bucket size
RedisBloom takes, its limits and error texts, its CF.INFO Size and its
CF.DEBUG line.

  - CF.RESERVE with BUCKETSIZE 1 to 255 other than 2, 4, 8 makes
    RedisBloom's own layout (lib/rcuckoo.c): CF.INFO as RedisBloom's
    formulas give it (first stage: capacity / bucket size rounded up to a
    power of two buckets; stage i: that times the expansion, rounded up to
    a power of two, to the i; Size 40 + 16 x stages + the tables, one byte
    a slot), adds, lookups, copies, deletes, growth, "Filter is full"
    (EXPANSION 0) and "Maximum expansions reached" (32 stages).
  - Options checked in RedisBloom's order (MAXITERATIONS, BUCKETSIZE,
    EXPANSION, then the capacity) with RedisBloom 2.6's texts, read off the
    wire; the accepted edges (1 and 255, 1 and 65535, 0 and 32768) work.
  - Such a key survives a restart from the snapshot (and, on the server,
    from the append-only log alone) and a SCANDUMP/LOADCHUNK copy (its
    first chunk is RedisBloom's 38-byte header).
  - CF.SCANDUMP of a key without items answers [0, nil], every layout.
  - CF.DEBUG: RedisBloom's bulk line "bktsize:.. buckets:.. items:..
    deletes:.. filters:.. max_iterations:.. expansion:.." with CF.INFO's
    numbers, for our chain, RedisBloom's layout and a growable key;
    "ERR not found" and WRONGTYPE as RedisBloom.
  - CF.INFO Size of a key CF.RESERVE made with bucket size 2, 4 or 8 (our
    own chain) is RedisBloom's figure for the same reserve and stages,
    with one stage and with several; a growable key reports its bytes.

Runs against bloomkit-server, or Redis with bloomkit.so when
$BLOOMKIT_MODULE is set (tests/module/test_cf_dialect.py).

    /usr/bin/python3 tests/server/test_cf_dialect.py
Prints "N passed, M failed"; exits non-zero on any failure.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import redis  # noqa: E402

from harness import (MODULE, Server, expect_error, recv_all, restarted, run_steps,  # noqa: E402
                     scandump)

WRONGTYPE = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
SMALL = b"-Capacity must be at least (BucketSize * 2)\r\n"
BUCKET_RANGE = b"-BUCKETSIZE: value must be an integer between 1 and 255, inclusive.\r\n"
ITER_RANGE = b"-MAXITERATIONS: value must be an integer between 1 and 65535, inclusive.\r\n"
EXP_RANGE = b"-EXPANSION: value must be an integer between 0 and 32768, inclusive.\r\n"
DEBUG_FIELDS = ["bktsize", "buckets", "items", "deletes", "filters", "max_iterations",
                "expansion"]


# -- RedisBloom's formulas ---------------------------------------------------

def pow2(x):
    """The next power of two >= x (RedisBloom's getNextN2); 0 stays 0."""
    n = 1
    while n < x:
        n <<= 1
    return n if x else 0


def rb_buckets(capacity, bucket_size):
    return pow2(capacity // bucket_size)


def rb_size(capacity, bucket_size, expansion, stages):
    n0, e = rb_buckets(capacity, bucket_size), pow2(expansion)
    return 40 + 16 * stages + sum(n0 * e ** i * bucket_size for i in range(stages))


# -- helpers -----------------------------------------------------------------

def raw(srv, *args):
    """One command's reply, the bytes as sent (so an error's exact text)."""
    s = srv.raw()
    try:
        req = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            req += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(req)
        data, _ = recv_all(s, until=lambda d: d.endswith(b"\r\n"))
        return data
    finally:
        s.close()


def info(r, key):
    plain = redis.Redis(connection_pool=r.connection_pool)   # no CFInfo parsing
    reply = plain.execute_command("CF.INFO", key)
    if isinstance(reply, dict):
        pairs = reply
    else:
        pairs = dict(zip(reply[0::2], reply[1::2]))
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in pairs.items()}


def debug(r, key):
    """CF.DEBUG's line as (field names in order, {field: number})."""
    line = r.execute_command("CF.DEBUG", key)
    assert isinstance(line, bytes), line
    pairs = [p.split(b":") for p in line.split(b" ")]
    names = [p[0].decode() for p in pairs]
    return names, {p[0].decode(): int(p[1]) for p in pairs}


def items(prefix, n):
    return ["%s:%d" % (prefix, i) for i in range(n)]


def add_all(r, key, keys):
    """CF.ADD each of keys (one pipeline); the replies, errors as their text."""
    pipe = r.pipeline(transaction=False)
    for k in keys:
        pipe.execute_command("CF.ADD", key, k)
    out = []
    for x in pipe.execute(raise_on_error=False):
        out.append(str(x) if isinstance(x, Exception) else x)
    return out


def check_info(r, key, capacity, bucket_size, expansion, stages, max_iterations=20):
    got = info(r, key)
    want = {"Size": rb_size(capacity, bucket_size, expansion, stages),
            "Number of buckets": rb_buckets(capacity, bucket_size),
            "Number of filters": stages, "Bucket size": bucket_size,
            "Expansion rate": pow2(expansion), "Max iterations": max_iterations}
    assert {k: got[k] for k in want} == want, (key, got, want)
    return got


# -- the tests ---------------------------------------------------------------

def limits_and_errors(srv, r):
    """RedisBloom's limits and texts, checked in its order; nothing made."""
    r.execute_command("BF.ADD", "str", "v")   # a key of another kind
    cases = [
        (["abc"], b"-Bad capacity\r\n"),
        (["1.5"], b"-Bad capacity\r\n"),
        (["0"], SMALL),
        (["-5"], SMALL),
        (["3"], SMALL),
        (["7", "BUCKETSIZE", "4"], SMALL),
        (["1", "BUCKETSIZE", "1"], SMALL),
        (["509", "BUCKETSIZE", "255"], SMALL),
        (["100", "BUCKETSIZE", "x"], b"-Couldn't parse BUCKETSIZE\r\n"),
        (["100", "BUCKETSIZE", "0"], BUCKET_RANGE),
        (["100", "BUCKETSIZE", "-1"], BUCKET_RANGE),
        (["100", "BUCKETSIZE", "256"], BUCKET_RANGE),
        (["100", "MAXITERATIONS", "x"], b"-Couldn't parse MAXITERATIONS\r\n"),
        (["100", "MAXITERATIONS", "0"], ITER_RANGE),
        (["100", "MAXITERATIONS", "65536"], ITER_RANGE),
        (["100", "EXPANSION", "x"], b"-Couldn't parse EXPANSION\r\n"),
        (["100", "EXPANSION", "-1"], EXP_RANGE),
        (["100", "EXPANSION", "32769"], EXP_RANGE),
        # RedisBloom's order: MAXITERATIONS, BUCKETSIZE, EXPANSION, capacity
        (["100", "BUCKETSIZE", "0", "MAXITERATIONS", "0"], ITER_RANGE),
        (["100", "EXPANSION", "-1", "BUCKETSIZE", "300"], BUCKET_RANGE),
        (["1", "EXPANSION", "32769"], EXP_RANGE),
        (["abc", "BUCKETSIZE", "0"], b"-Bad capacity\r\n"),
        (["100", "BUCKETSIZE"], b"-ERR wrong number of arguments for 'cf.reserve' command\r\n"),
    ]
    for args, want in cases:
        got = raw(srv, "CF.RESERVE", "e", *args)
        assert got == want, (args, got, want)
    assert r.exists("e") == 0
    # CF.INSERT's CAPACITY: the same texts (it takes no other option)
    for cap, want in (("x", b"-Bad capacity\r\n"), ("0", SMALL), ("-1", SMALL), ("3", SMALL)):
        got = raw(srv, "CF.INSERT", "e", "CAPACITY", cap, "ITEMS", "a")
        assert got == want, (cap, got)
    assert r.exists("e") == 0
    # the key: RedisBloom's answers once the options are good
    assert raw(srv, "CF.RESERVE", "str", "100", "BUCKETSIZE", "3") == WRONGTYPE
    assert raw(srv, "CF.RESERVE", "str", "abc", "BUCKETSIZE", "3") == b"-Bad capacity\r\n"
    assert r.execute_command("CF.RESERVE", "x", 100, "BUCKETSIZE", 3)
    assert raw(srv, "CF.RESERVE", "x", "100", "BUCKETSIZE", "3") == b"-ERR item exists\r\n"
    assert raw(srv, "CF.RESERVE", "x", "100") == b"-ERR item exists\r\n"
    # more than this machine holds
    assert raw(srv, "CF.RESERVE", "huge", "1000000000000000", "BUCKETSIZE", "3") == \
        b"-ERR Insufficient memory to create filter\r\n"
    assert r.exists("huge") == 0
    # the accepted edges
    for key, args, want in (
            ("b1", [2, "BUCKETSIZE", 1], (2, 1, 1, 20)),
            ("b255", [510, "BUCKETSIZE", 255], (510, 255, 1, 20)),
            ("m1", [100, "BUCKETSIZE", 3, "MAXITERATIONS", 1], (100, 3, 1, 1)),
            ("m65535", [100, "BUCKETSIZE", 5, "MAXITERATIONS", 65535], (100, 5, 1, 65535)),
            ("m65535c", [100, "MAXITERATIONS", 65535], (100, 2, 1, 65535)),
            ("e0", [100, "BUCKETSIZE", 3, "EXPANSION", 0], (100, 3, 0, 20)),
            ("e32768", [100, "BUCKETSIZE", 3, "EXPANSION", 32768], (100, 3, 32768, 20)),
            ("e3", [100, "BUCKETSIZE", 3, "EXPANSION", 3], (100, 3, 3, 20))):
        assert r.execute_command("CF.RESERVE", key, *args), key
        cap, bs, exp, it = want
        check_info(r, key, cap, bs, exp, 1, it)


def bucket_sizes(srv, r):
    """1, 3, 5, 255: RedisBloom's layout, its numbers as the formulas give
    them, through adds, copies, deletes and a stage or two of growth."""
    for bs, cap, exp in ((1, 1000, 1), (3, 1000, 2), (5, 1000, 4), (255, 2040, 2)):
        key = "bs%d" % bs
        assert r.execute_command("CF.RESERVE", key, cap, "BUCKETSIZE", bs, "EXPANSION", exp)
        check_info(r, key, cap, bs, exp, 1)
        slots = rb_buckets(cap, bs) * bs
        keys = items(key, slots + slots // 2)  # past the first stage
        assert add_all(r, key, keys) == [1] * len(keys), key
        got = info(r, key)
        stages = got["Number of filters"]
        assert stages >= 2, got
        check_info(r, key, cap, bs, exp, stages)
        assert got["Number of items inserted"] == len(keys), got
        assert r.cf().mexists(key, *keys) == [1] * len(keys), key
        # copies: counted, one removed by each CF.DEL
        assert r.execute_command("CF.ADD", key, "dup") == 1
        assert r.execute_command("CF.ADD", key, "dup") == 1
        assert r.execute_command("CF.ADDNX", key, "dup") == 0
        assert r.execute_command("CF.COUNT", key, "dup") >= 2
        assert r.execute_command("CF.DEL", key, "dup") == 1
        assert r.execute_command("CF.EXISTS", key, "dup") == 1
        assert r.execute_command("CF.DEL", key, "dup") == 1
        got = info(r, key)
        assert got["Number of items inserted"] == len(keys), got
        assert got["Number of items deleted"] == 2, got
        names, d = debug(r, key)
        assert names == DEBUG_FIELDS, names
        assert d == {"bktsize": bs, "buckets": rb_buckets(cap, bs),
                     "items": len(keys), "deletes": 2,
                     "filters": got["Number of filters"], "max_iterations": 20,
                     "expansion": exp}, d


def full_and_max_expansions(srv, r):
    """EXPANSION 0: "Filter is full"; expansion 1 from a tiny stage: 32
    stages, then "Maximum expansions reached" for every add."""
    assert r.execute_command("CF.RESERVE", "full", 6, "BUCKETSIZE", 3, "EXPANSION", 0)
    replies = add_all(r, "full", items("f", 40))
    assert replies[0] == 1 and "Filter is full" in replies, replies
    added = replies.index("Filter is full")
    assert 0 < added <= 6, replies
    check_info(r, "full", 6, 3, 0, 1)
    assert info(r, "full")["Number of items inserted"] == replies.count(1)
    # CF.INSERT answers -1 where there is no room
    assert -1 in r.execute_command("CF.INSERT", "full", "ITEMS", *items("g", 10))

    assert r.execute_command("CF.RESERVE", "max", 2, "BUCKETSIZE", 1)
    replies = add_all(r, "max", items("m", 400))
    ok = [x for x in replies if x == 1]
    errs = set(x for x in replies if x != 1)
    assert errs == {"Maximum expansions reached"}, errs
    assert replies == [1] * len(ok) + [replies[-1]] * (len(replies) - len(ok))
    check_info(r, "max", 2, 1, 1, 32)
    assert info(r, "max")["Number of items inserted"] == len(ok)
    assert r.cf().mexists("max", *items("m", len(ok))) == [1] * len(ok)
    expect_error(lambda: r.execute_command("CF.ADDNX", "max", "new"),
                 "Maximum expansions reached", "ERR Maximum expansions reached")


def fill_for_restart(srv, r):
    assert r.execute_command("CF.RESERVE", "keep", 300, "BUCKETSIZE", 3, "MAXITERATIONS",
                             50, "EXPANSION", 2)
    assert add_all(r, "keep", items("k", 500)) == [1] * 500
    for i in range(0, 20, 2):
        assert r.execute_command("CF.DEL", "keep", "k:%d" % i) == 1
    assert r.execute_command("CF.RESERVE", "keep1", 100, "BUCKETSIZE", 1)
    KEPT["info"] = (info(r, "keep"), info(r, "keep1"))
    KEPT["debug"] = (debug(r, "keep"), debug(r, "keep1"))


KEPT = {}


def check_kept(r):
    assert (info(r, "keep"), info(r, "keep1")) == KEPT["info"]
    assert (debug(r, "keep"), debug(r, "keep1")) == KEPT["debug"]
    kept = [k for i, k in enumerate(items("k", 500)) if not (i < 20 and i % 2 == 0)]
    assert r.cf().mexists("keep", *kept) == [1] * len(kept)
    # and it keeps working as before
    assert r.execute_command("CF.ADD", "keep1", "after") == 1
    assert r.execute_command("CF.EXISTS", "keep1", "after") == 1
    assert r.execute_command("CF.DEL", "keep1", "after") == 1
    KEPT["info"] = (info(r, "keep"), info(r, "keep1"))
    KEPT["debug"] = (debug(r, "keep"), debug(r, "keep1"))


def restart_from_snapshot(srv, r):
    r = restarted(srv, r, save=True)
    check_kept(r)
    return r


def restart_from_log(srv, r):
    """SIGKILL: the keys come back from the append-only log (the server;
    the module's Redis runs here without one, so it restarts from RDB)."""
    r = restarted(srv, r, save=MODULE is not None)
    check_kept(r)
    return r


def scandump_round_trip(srv, r):
    """SCANDUMP/LOADCHUNK copy of RedisBloom's layout (its 38-byte header
    first), and [0, nil] for a key without items, every layout."""
    chunks = scandump(r, "CF", "keep")
    assert len(chunks) >= 2 and len(chunks[0][1]) == 38, [len(c[1]) for c in chunks]
    for it, data in chunks:
        assert r.execute_command("CF.LOADCHUNK", "copy", it, data)
    assert info(r, "copy") == info(r, "keep")
    assert debug(r, "copy") == debug(r, "keep")
    assert scandump(r, "CF", "copy") == chunks
    kept = [k for i, k in enumerate(items("k", 500)) if not (i < 20 and i % 2 == 0)]
    assert r.cf().mexists("copy", *kept) == [1] * len(kept)
    assert r.restore("dumped", 0, r.dump("keep")) in (b"OK", True)
    assert info(r, "dumped") == info(r, "keep")
    # nothing to dump: [0, nil]
    r.execute_command("CF.RESERVE", "empty3", 100, "BUCKETSIZE", 3)
    r.execute_command("CF.RESERVE", "empty2", 100)
    r.execute_command("CF.ADD", "emptyg", "x")
    r.execute_command("CF.DEL", "emptyg", "x")
    for key in ("empty3", "empty2", "emptyg"):
        for it in (0, 1):
            assert r.execute_command("CF.SCANDUMP", key, it) == [0, None], key


def debug_replies(srv, r):
    """CF.DEBUG: RedisBloom's bulk line, CF.INFO's numbers, every layout."""
    r.execute_command("CF.RESERVE", "dchain", 1000)
    r.execute_command("CF.RESERVE", "drb", 1000, "BUCKETSIZE", 3)
    add_all(r, "dchain", items("d", 10))
    add_all(r, "drb", items("d", 10))
    r.execute_command("CF.DEL", "drb", "d:0")
    r.execute_command("CF.ADD", "dgrow", "x")
    assert r.execute_command("CF.DEBUG", "dchain") == \
        b"bktsize:2 buckets:512 items:10 deletes:0 filters:1 max_iterations:20 expansion:1"
    assert r.execute_command("CF.DEBUG", "drb") == \
        b"bktsize:3 buckets:512 items:9 deletes:1 filters:1 max_iterations:20 expansion:1"
    line = b"bktsize:3 buckets:512 items:9 deletes:1 filters:1 max_iterations:20 expansion:1"
    assert raw(srv, "CF.DEBUG", "drb") == b"$%d\r\n%s\r\n" % (len(line), line)  # a bulk string
    for key in ("dchain", "drb", "dgrow"):
        names, d = debug(r, key)
        assert names == DEBUG_FIELDS, names
        got = info(r, key)
        assert d == {"bktsize": got["Bucket size"], "buckets": got["Number of buckets"],
                     "items": got["Number of items inserted"],
                     "deletes": got["Number of items deleted"],
                     "filters": got["Number of filters"],
                     "max_iterations": got["Max iterations"],
                     "expansion": got["Expansion rate"]}, (key, d, got)
    r.execute_command("BF.ADD", "dbf", "x")
    assert raw(srv, "CF.DEBUG", "missing") == b"-ERR not found\r\n"
    assert raw(srv, "CF.DEBUG", "dbf") == WRONGTYPE
    assert raw(srv, "CF.DEBUG") == b"-ERR wrong number of arguments for 'cf.debug' command\r\n"


def info_size_reserved(srv, r):
    """CF.INFO Size of our own chain: RedisBloom's figure for the same
    reserve and number of stages; a growable key: its bytes."""
    # one stage: REDISBLOOM.md's measured figures
    r.execute_command("CF.RESERVE", "s1", 1000)
    assert info(r, "s1")["Size"] == 1080
    r.execute_command("CF.RESERVE", "s2", 1000000)
    assert info(r, "s2")["Size"] == 1048632
    assert r.cf().info("s1").size == 1080   # python-redis's parser
    # several stages, bucket sizes 2, 4 and 8, expansions 1, 2 and 3 (RedisBloom
    # rounds 3 up to 4)
    for key, cap, bs, exp, stages in (("g2", 50, 2, 2, 4), ("g4", 100, 4, 1, 3),
                                      ("g8", 200, 8, 2, 2), ("g3", 100, 2, 3, 2)):
        r.execute_command("CF.RESERVE", key, cap, "BUCKETSIZE", bs, "EXPANSION", exp)
        i = 0
        while info(r, key)["Number of filters"] < stages:
            assert r.execute_command("CF.ADD", key, "%s:%d" % (key, i)) == 1
            i += 1
        got = info(r, key)
        assert got["Size"] == rb_size(cap, bs, exp, stages), (key, got)
        # MEMORY USAGE is what it really holds (our tables are smaller)
        assert 0 < r.memory_usage(key), key
    assert info(r, "g2")["Size"] == 1064   # 40 + 4 x 16 + (32 + 64 + 128 + 256) x 2
    assert info(r, "g3")["Size"] == 712    # 40 + 2 x 16 + (64 + 256) x 2
    # a growable key (CF.ADD made it): its own bytes
    add_all(r, "grow", items("gr", 3000))
    got = info(r, "grow")
    assert got["Number of filters"] == 1 and got["Expansion rate"] == 2, got
    assert 0 < got["Size"] <= r.memory_usage("grow"), (got, r.memory_usage("grow"))


def main():
    steps = [limits_and_errors, bucket_sizes, full_and_max_expansions, fill_for_restart,
             restart_from_snapshot, restart_from_log, scandump_round_trip, debug_replies,
             info_size_reserved]
    sys.exit(run_steps(steps))


if __name__ == "__main__":
    main()
