#!/usr/bin/python3
"""Issue 31's dialects for BF.* and the defaults' configuration.

Redis 8's: CONFIG GET / CONFIG SET of bf-error-rate, bf-initial-size,
bf-expansion-factor, cf-bucket-size, cf-initial-size, cf-max-iterations,
cf-expansion-factor, cf-max-expansions (ranges and texts of Redis 8; a
change applies to keys created afterwards); EXPANSION 0 as NONSCALING on
BF.RESERVE and BF.INSERT (and bf-expansion-factor 0 for keys an add
creates). valkey-bloom's: TIGHTENING, SEED and VALIDATESCALETO on
BF.INSERT / BF.RESERVE with its ranges and texts; BF.INFO key ERROR |
TIGHTENING | MAXSCALEDCAPACITY (the whole reply stays RedisBloom's five
pairs); a SEED key replays to the same filter after a restart from the
log. RedisBloom's BF.DEBUG for our chain, the growable filter and a
filter taken over from RedisBloom (its lines computed from RedisBloom's
sizing rules, docs/FORMAT.md, for every key of the 2.6.28 corpus).

In the module (tests/module/test_bf_dialect.py) the configuration names
are "bloomkit.<name>" on Redis 7 (MODULE_PREFIX below), and keyspace
notifications are checked there.

Run with Debian's interpreter: /usr/bin/python3 tests/server/test_bf_dialect.py
"""
import base64
import gzip
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import MODULE, ROOT, Runner, Server, stop_to_aof  # noqa: E402
from redis.exceptions import ResponseError  # noqa: E402

CORPUS = os.path.join(ROOT, "tests", "golden", "redisbloom")
PREFIX = "bloomkit." if MODULE else ""   # Redis 7.x prefixes module configs
SEED = bytes(range(32))


def ex(r, *args):
    return r.execute_command(*args)


def error_of(r, *args):
    try:
        ex(r, *args)
    except ResponseError as e:
        return str(e)
    raise AssertionError("no error for %r" % (args,))


def info(r, key):
    reply = ex(r, "BF.INFO", key)
    if isinstance(reply, dict):
        return {k.decode() if isinstance(k, bytes) else k: v for k, v in reply.items()}
    return {k.decode(): v for k, v in zip(reply[0::2], reply[1::2])}


def one(reply):
    return reply[0] if isinstance(reply, list) else list(reply.values())[0]


# ---------------------------------------------------------------- EXPANSION 0

def expansion_zero(r):
    assert ex(r, "BF.RESERVE", "e0", "0.01", "10", "EXPANSION", "0") == b"OK"
    i = info(r, "e0")
    assert i["Expansion rate"] is None and i["Capacity"] == 10, i
    got = ex(r, "BF.INSERT", "e1", "CAPACITY", "3", "EXPANSION", "0", "ITEMS", "a", "b", "c", "d")
    assert got[:3] == [1, 1, 1] and "non scaling filter is full" in str(got[3]), got
    assert info(r, "e1")["Expansion rate"] is None
    # EXPANSION 0 with NONSCALING is the same filter, not a conflict
    assert ex(r, "BF.RESERVE", "e2", "0.01", "10", "EXPANSION", "0", "NONSCALING") == b"OK"
    assert "nonscaling filters cannot expand" in error_of(
        r, "BF.RESERVE", "e3", "0.01", "10", "EXPANSION", "2", "NONSCALING")
    assert "bad expansion" in error_of(r, "BF.RESERVE", "e4", "0.01", "10", "EXPANSION", "-1")


# ---------------------------------------------------------------- configuration

LIMITS = [  # name, default, lowest, highest
    ("bf-error-rate", "0.01", None, None),
    ("bf-initial-size", "100", 1, 1 << 30),
    ("bf-expansion-factor", "2", 0, 32768),
    ("cf-bucket-size", "2", 1, 255),
    ("cf-initial-size", "1024", 4, 1 << 30),
    ("cf-max-iterations", "20", 1, 65535),
    ("cf-expansion-factor", "1", 0, 32768),
    ("cf-max-expansions", "32", 1, 65536),
]


def config_get(r, name):
    reply = ex(r, "CONFIG", "GET", PREFIX + name)
    if isinstance(reply, dict):
        return list(reply.values())[0].decode()
    assert len(reply) == 2, (name, reply)
    return reply[1].decode()


def config_error(r, name, value):
    e = error_of(r, "CONFIG", "SET", PREFIX + name, value)
    assert e.startswith("CONFIG SET failed (possibly related to argument '%s%s') - "
                        % (PREFIX, name)), e
    return e.split(" - ", 1)[1]


def config_names(r):
    for name, default, lo, hi in LIMITS:
        assert config_get(r, name) == default, (name, config_get(r, name))
        assert config_error(r, name, "x1") == "Invalid value for `%s`" % name
        if lo is None:
            assert config_error(r, name, "0") == \
                "Value for `%s` must be in the range (0.000000, 1.000000)" % name
            assert config_error(r, name, "1") == \
                "Value for `%s` must be in the range (0.000000, 1.000000)" % name
            continue
        if name == "cf-bucket-size":
            hi = 255   # cf-initial-size 1024: half of it is above 255
        if name == "cf-initial-size":
            lo = 4     # 2 x cf-bucket-size 2
        want = "Value for `%s` must be in the range [%d, %d]" % (name, lo, hi)
        assert config_error(r, name, str(lo - 1)) == want, config_error(r, name, str(lo - 1))
        assert config_error(r, name, str(hi + 1)) == want
    # bloomkit's cuckoo filters take buckets of 2, 4 or 8
    assert "must be 2, 4 or 8" in config_error(r, "cf-bucket-size", "3")


def config_applies(r):
    ex(r, "BF.ADD", "before", "x")
    assert ex(r, "CONFIG", "SET", PREFIX + "bf-initial-size", "1000") == b"OK"
    assert ex(r, "CONFIG", "SET", PREFIX + "bf-error-rate", "0.001") == b"OK"
    assert config_get(r, "bf-initial-size") == "1000"
    assert config_get(r, "bf-error-rate") == "0.001"
    ex(r, "BF.ADD", "after", "x")
    assert info(r, "before")["Capacity"] == 100
    assert info(r, "after")["Capacity"] == 1000, info(r, "after")
    assert one(ex(r, "BF.INFO", "after", "ERROR")) in (b"0.001", 0.001)
    # above 0.25 is taken as 0.25 (Redis 8)
    assert ex(r, "CONFIG", "SET", PREFIX + "bf-error-rate", "0.5") == b"OK"
    assert config_get(r, "bf-error-rate") == "0.25"
    # bf-expansion-factor 0: an add creates a NONSCALING filter
    assert ex(r, "CONFIG", "SET", PREFIX + "bf-expansion-factor", "0") == b"OK"
    ex(r, "BF.ADD", "flat", "x")
    assert info(r, "flat")["Expansion rate"] is None
    # CF settings reach CF keys created afterwards
    assert ex(r, "CONFIG", "SET", PREFIX + "cf-bucket-size", "4") == b"OK"
    assert ex(r, "CONFIG", "SET", PREFIX + "cf-max-iterations", "30") == b"OK"
    assert ex(r, "CONFIG", "SET", PREFIX + "cf-initial-size", "2000") == b"OK"
    ex(r, "CF.RESERVE", "cfk", "4000")
    ci = ex(r, "CF.INFO", "cfk")
    ci = ci if isinstance(ci, dict) else dict(zip(ci[0::2], ci[1::2]))
    ci = {k.decode() if isinstance(k, bytes) else k: v for k, v in ci.items()}
    assert ci["Bucket size"] == 4 and ci["Max iterations"] == 30, ci
    for name, default, _, _ in LIMITS:     # back to the defaults
        if name in ("cf-initial-size",):
            continue
        ex(r, "CONFIG", "SET", PREFIX + name, default)
    ex(r, "CONFIG", "SET", PREFIX + "cf-initial-size", "1024")
    ex(r, "CONFIG", "SET", PREFIX + "cf-bucket-size", "2")


# ---------------------------------------------------------------- valkey-bloom options

def valkey_options(r):
    for cmd in (("BF.INSERT", "v"), ("BF.RESERVE", "v", "0.01", "100")):
        tail = ("ITEMS", "a") if cmd[0] == "BF.INSERT" else ()
        assert error_of(r, *cmd, "TIGHTENING", "x", *tail) == "bad tightening ratio"
        assert error_of(r, *cmd, "TIGHTENING", "1", *tail) == "(0 < tightening ratio range < 1)"
        assert error_of(r, *cmd, "TIGHTENING", "0", *tail) == "(0 < tightening ratio range < 1)"
        assert error_of(r, *cmd, "SEED", "short", *tail) == "invalid seed"
        assert error_of(r, *cmd, "SEED", SEED + b"x", *tail) == "invalid seed"
        assert error_of(r, *cmd, "VALIDATESCALETO", "0", *tail) == \
            "(capacity should be larger than 0)"
        assert error_of(r, *cmd, "VALIDATESCALETO", "x", *tail) == "bad capacity"
        assert error_of(r, *cmd, "NONSCALING", "VALIDATESCALETO", "10", *tail) == \
            "cannot use NONSCALING and VALIDATESCALETO options together"
        assert error_of(r, *cmd, "VALIDATESCALETO", str(10 ** 18), *tail) == \
            "provided VALIDATESCALETO causes bloom object to exceed memory limit"
        assert "wrong number of arguments" in error_of(r, *cmd, "SEED") or cmd[0] == "BF.RESERVE"
    assert ex(r, "EXISTS", "v") == 0
    assert ex(r, "BF.INSERT", "t", "TIGHTENING", "0.9", "VALIDATESCALETO", "100000",
              "ITEMS", "a") == [1]
    assert ex(r, "BF.RESERVE", "t2", "0.01", "100", "TIGHTENING", "0.9", "SEED", SEED,
              "VALIDATESCALETO", "5000") == b"OK"


def tightening(r):
    """TIGHTENING r: the rates of stages 1, 2, ... shrink by r (stage 0 at
    error / 2), kept to a multiple of 1/65536; the compound rate stays under
    the error asked for; GROWABLE takes none."""
    items = ["t%d" % i for i in range(3000)]
    ex(r, "BF.INSERT", "tk5", "CAPACITY", "100", "TIGHTENING", "0.5", "ITEMS", *items)
    assert all(ex(r, "BF.MEXISTS", "tk5", *items))
    assert float(one(ex(r, "BF.INFO", "tk5", "TIGHTENING"))) == 0.5
    lines = [x.decode() if isinstance(x, bytes) else x for x in ex(r, "BF.DEBUG", "tk5")]
    rates = [float(line.split("ratio:")[1].split()[0]) for line in lines[1:]]
    assert len(rates) >= 5, lines
    for a, b in zip(rates[1:], rates[2:]):
        assert abs(b / a - 0.5) < 1e-6, rates
    absent = ["absent-%d" % i for i in range(20000)]
    fp = sum(ex(r, "BF.MEXISTS", "tk5", *absent))
    # binomial: 20,000 trials at p <= 0.01 stay under 200 + 5 sigma (70)
    assert fp <= 270, fp
    ex(r, "BF.RESERVE", "tk7", "0.01", "100", "TIGHTENING", "0.7")
    assert abs(float(one(ex(r, "BF.INFO", "tk7", "TIGHTENING"))) - 0.7) <= 1 / 65536
    assert "GROWABLE takes no TIGHTENING" in error_of(r, "BF.INSERT", "tg", "GROWABLE",
                                                       "TIGHTENING", "0.5", "ITEMS", "a")


def seeded(r):
    """Two keys differing only by SEED: the same answers for added items,
    different bits (BF.SCANDUMP) for the same items."""
    items = ["s%d" % i for i in range(300)]
    ex(r, "BF.INSERT", "seed1", "CAPACITY", "1000", "SEED", SEED, "ITEMS", *items)
    ex(r, "BF.INSERT", "seed0", "CAPACITY", "1000", "ITEMS", *items)
    assert all(ex(r, "BF.MEXISTS", "seed1", *items))
    assert ex(r, "BF.SCANDUMP", "seed1", 0) != ex(r, "BF.SCANDUMP", "seed0", 0)
    # an add that creates its key with SEED (growable: no CAPACITY)
    ex(r, "BF.INSERT", "seedg", "SEED", SEED, "ITEMS", *items)
    ex(r, "BF.RESERVE", "seedr", "0.01", "100", "SEED", SEED)
    ex(r, "BF.MADD", "seedr", *items)
    # keys made with TIGHTENING that grew stages replay to the same bits
    ex(r, "BF.INSERT", "tight5", "CAPACITY", "100", "TIGHTENING", "0.5", "ITEMS", *items)
    ex(r, "BF.RESERVE", "tight7", "0.01", "50", "TIGHTENING", "0.7")
    ex(r, "BF.MADD", "tight7", *items)
    return {k: ex(r, "BF.SCANDUMP", k, 0)
            for k in ("seed1", "seed0", "seedg", "seedr", "tight5", "tight7")}


def info_fields(r):
    ex(r, "BF.RESERVE", "i1", "0.001", "1000")
    ex(r, "BF.RESERVE", "i2", "0.01", "1000", "NONSCALING")
    assert float(one(ex(r, "BF.INFO", "i1", "ERROR"))) == 0.001
    assert float(one(ex(r, "BF.INFO", "i1", "TIGHTENING"))) == 0.9
    cap = one(ex(r, "BF.INFO", "i1", "MAXSCALEDCAPACITY"))
    assert isinstance(cap, int) and cap > 1000 * 1000, cap
    assert float(one(ex(r, "BF.INFO", "i2", "ERROR"))) == 0.01
    for field in ("TIGHTENING", "MAXSCALEDCAPACITY"):
        assert error_of(r, "BF.INFO", "i2", field) == "Invalid information value"
    # the whole reply keeps RedisBloom's five pairs, in its order
    whole = ex(r, "BF.INFO", "i1")
    keys = list(whole.keys()) if isinstance(whole, dict) else whole[0::2]
    assert [k.decode() for k in keys] == ["Capacity", "Size", "Number of filters",
                                         "Number of items inserted", "Expansion rate"], keys
    ex(r, "BF.ADD", "ig", "x")      # growable
    assert float(one(ex(r, "BF.INFO", "ig", "ERROR"))) == 0.01
    assert one(ex(r, "BF.INFO", "ig", "MAXSCALEDCAPACITY")) > 10 ** 6


# ---------------------------------------------------------------- BF.DEBUG

def debug_ours(r):
    ex(r, "BF.RESERVE", "d", "0.01", "1000")
    ex(r, "BF.MADD", "d", *["d%d" % i for i in range(2500)])
    lines = [x.decode() for x in ex(r, "BF.DEBUG", "d")]
    i = info(r, "d")
    assert lines[0] == "size:%d" % i["Number of items inserted"], lines
    assert len(lines) == 1 + i["Number of filters"]
    stages = [dict(f.split(":", 1) for f in line.split(" ")) for line in lines[1:]]
    assert [list(s) for s in stages] == [["bytes", "bits", "hashes", "hashwidth", "capacity",
                                          "size", "ratio"]] * len(stages)
    assert sum(int(s["capacity"]) for s in stages) == i["Capacity"]
    assert sum(int(s["size"]) for s in stages) == i["Number of items inserted"]
    assert float(stages[0]["ratio"]) == 0.005 and int(stages[0]["capacity"]) == 1000
    ex(r, "BF.ADD", "dg", "x")
    lines = [x.decode() for x in ex(r, "BF.DEBUG", "dg")]
    assert lines[0] == "size:1" and len(lines) == 2 and "hashes:1 " in lines[1], lines
    assert error_of(r, "BF.DEBUG", "missing") == "not found"
    ex(r, "CF.ADD", "cfx", "x")
    assert error_of(r, "BF.DEBUG", "cfx").startswith("WRONGTYPE")


def redisbloom_debug_lines(create, nitems):
    """BF.DEBUG of RedisBloom's chain for a key made by `create` and holding
    nitems (docs/FORMAT.md: sizing a stage, adding)."""
    error, capacity, growth, nonscaling = 0.01, 100, 2, False
    if create and create[0].upper() == "BF.RESERVE":
        error, capacity = float(create[2]), int(create[3])
        rest = [str(x).upper() for x in create[4:]]
        nonscaling = "NONSCALING" in rest
        if "EXPANSION" in rest:
            growth = int(rest[rest.index("EXPANSION") + 1])
    e = error if nonscaling else error / 2
    n, left, lines = capacity, nitems, []
    while True:
        bpe = abs(math.log(e) / 0.480453013918201)
        hashes = math.ceil(0.693147180559945 * bpe)
        bits = max(1, int(n * bpe))
        nbytes = ((bits + 63) // 64) * 8
        size = min(left, n)
        lines.append("bytes:%d bits:%d hashes:%d hashwidth:64 capacity:%d size:%d ratio:%s"
                     % (nbytes, nbytes * 8, hashes, n, size, "%g" % e))
        left -= size
        if left == 0 or nonscaling:
            break
        n, e = n * growth, e * 0.5
    return ["size:%d" % nitems] + lines


def debug_redisbloom(r):
    with gzip.open(os.path.join(CORPUS, "redisbloom-2.6.28.json.gz")) as fh:
        data = json.load(fh)
    checked = 0
    for k in data["keys"]:
        key = k["key"]
        if not key.startswith("bf_"):
            continue
        ans = data["answers"][key]
        for it, chunk in ans["scandump"]:
            ex(r, "BF.LOADCHUNK", "rb:" + key, it, base64.b64decode(chunk))
        got = [x.decode() for x in ex(r, "BF.DEBUG", "rb:" + key)]
        rinfo = dict(zip(ans["info"][0::2], ans["info"][1::2]))
        nitems = rinfo["Number of items inserted"]
        assert got[0] == "size:%d" % nitems, (key, got[0])
        assert len(got) - 1 == rinfo["Number of filters"], (key, got)
        want = redisbloom_debug_lines(k["create"], nitems)
        # stage sizes: RedisBloom's false positives leave stages short of
        # their entries; everything else is its sizing
        strip = [" ".join(f for f in line.split(" ") if not f.startswith("size:"))
                 for line in got[1:]]
        want_strip = [" ".join(f for f in line.split(" ") if not f.startswith("size:"))
                      for line in want[1:]][:len(strip)]
        assert strip == want_strip, (key, got, want)
        assert sum(int(line.split("capacity:")[1].split(" ")[0]) for line in got[1:]) == \
            rinfo["Capacity"], key
        assert sum(8 * 0 + int(line.split("bytes:")[1].split(" ")[0]) + 64
                   for line in got[1:]) + 32 == rinfo["Size"], key
        checked += 1
    assert checked >= 5, checked


# ---------------------------------------------------------------- replay

def replay(srv, r):
    before = seeded(r)
    if MODULE:   # Redis: from its append-only file alone
        stop_to_aof(srv)
        srv.start()
    else:        # bloomkit-server: SIGKILL, then replay of the log
        srv.kill()
        srv.start()
    r = srv.client()
    after = {k: ex(r, "BF.SCANDUMP", k, 0) for k in before}
    assert before == after, "replayed filters differ"
    items = ["s%d" % i for i in range(300)]
    assert all(ex(r, "BF.MEXISTS", "seedg", *items))


def main():
    run = Runner("bf_dialect")
    with Server() as srv:
        r = srv.client()
        run.check("EXPANSION 0 is NONSCALING", expansion_zero, r)
        run.check("CONFIG GET/SET names, ranges, texts", config_names, r)
        run.check("a CONFIG SET applies to keys created afterwards", config_applies, r)
        run.check("TIGHTENING / SEED / VALIDATESCALETO", valkey_options, r)
        run.check("BF.INFO ERROR / TIGHTENING / MAXSCALEDCAPACITY", info_fields, r)
        run.check("TIGHTENING sets the chain's ratio", tightening, r)
        run.check("BF.DEBUG of our chain and the growable filter", debug_ours, r)
        run.check("BF.DEBUG of RedisBloom's filters is RedisBloom's", debug_redisbloom, r)
    flags = ("--appendonly", "yes") if MODULE else ()
    with Server(*flags) as srv:
        run.check("SEED and TIGHTENING keys replay to the same filters", replay, srv,
                  srv.client())
    run.finish()


if __name__ == "__main__":
    main()
