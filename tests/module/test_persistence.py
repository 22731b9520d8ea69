#!/usr/bin/python3
"""Persistence of every module data type in real Redis.

For each of SAVE + restart, DEBUG RELOAD, and BGREWRITEAOF + restart (an
AOF without the RDB preamble, so the types' aof_rewrite is what rebuilds
them), a keyspace holding every kind is written, fingerprinted, put
through the cycle and fingerprinted again: every filter must answer
identically (membership and counts over fixed items, *.INFO, the whole
SCANDUMP byte stream, DEBUG DIGEST-VALUE) afterwards. A *.LOADCHUNK in
progress ("bkloading") survives too and is finished after the cycle.
A scalable Bloom filter of several stages, a CF chain of several filters,
a filter bigger than one 4 MiB AOF chunk and a key with a TTL are among
the keys.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
import harness  # noqa: E402
from harness import Runner, Server, stop_to_aof  # noqa: E402

ITEMS = ["item:%d" % i for i in range(3000)]
PROBES = ["item:%d" % i for i in range(0, 3000, 7)] + ["miss:%d" % i for i in range(2000)]


def populate(r):
    p = r.pipeline(transaction=False)
    p.execute_command("BF.RESERVE", "bf:grow", "0.01", "100")     # several stages
    for i in range(0, 1500, 100):
        p.execute_command("BF.MADD", "bf:grow", *ITEMS[i:i + 100])
    p.execute_command("BF.RESERVE", "bf:big", "0.001", "6000000")  # > one AOF chunk
    p.execute_command("BF.MADD", "bf:big", *ITEMS[:500])
    p.execute_command("BF.ADD", "bf:ttl", "x")
    p.execute_command("PEXPIRE", "bf:ttl", "3600000")
    p.execute_command("CF.RESERVE", "cf:chain", "64", "EXPANSION", "2")
    for it in ITEMS[:600]:
        p.execute_command("CF.ADD", "cf:chain", it)
    p.execute_command("CF.DEL", "cf:chain", ITEMS[0])
    p.execute_command("CBF.RESERVE", "cbf:a", "0.01", "5000")
    p.execute_command("CBF.MADD", "cbf:a", *ITEMS[:800])
    p.execute_command("CBF.MADD", "cbf:a", *ITEMS[:100])
    p.execute_command("WF.RESERVE", "wf:a", "0.01", "5000", "3600000")
    p.execute_command("WF.MADD", "wf:a", *ITEMS[:700])
    p.execute_command("SET", "plain", "a string")  # a key of Redis's own
    p.execute_command("BF.RESERVE", "bf:src", "0.01", "2000")
    p.execute_command("BF.MADD", "bf:src", *ITEMS[:900])
    p.execute()
    # a load in progress: the first half of bf:src's dump in bf:part
    dump = scandump(r, "BF", "bf:src")
    half = len(dump) // 2
    assert r.execute_command("BF.LOADCHUNK", "bf:part", half, dump[:half]) in (b"OK", True)
    return dump, half


def scandump(r, fam, key):
    """The whole SCANDUMP byte stream of key."""
    return b"".join(data for _, data in harness.scandump(r, fam, key, limit=10000))


FILTERS = [("bf:grow", "BF"), ("bf:big", "BF"), ("bf:ttl", "BF"), ("bf:src", "BF"),
           ("cf:chain", "CF"), ("cbf:a", "CBF"), ("wf:a", "WF")]


def fingerprint(r):
    fp = {}
    p = r.pipeline(transaction=False)
    for key, fam in FILTERS:
        p.execute_command("TYPE", key)
        if fam == "BF":
            p.execute_command("BF.MEXISTS", key, *PROBES)
            p.execute_command("BF.INFO", key)
            p.execute_command("BF.CARD", key)
        elif fam == "CF":
            for it in PROBES[:600]:
                p.execute_command("CF.COUNT", key, it)
            p.execute_command("CF.INFO", key)
        elif fam == "CBF":
            for it in PROBES[:600]:
                p.execute_command("CBF.COUNT", key, it)
            p.execute_command("CBF.INFO", key)
        else:
            p.execute_command("WF.MEXISTS", key, *PROBES)
        p.execute_command("DEBUG", "DIGEST-VALUE", key)
    p.execute_command("TYPE", "bf:part")
    p.execute_command("DEBUG", "DIGEST-VALUE", "bf:part")
    p.execute_command("GET", "plain")
    p.execute_command("DEBUG", "DIGEST")
    p.execute_command("DBSIZE")
    fp["answers"] = p.execute()
    fp["dumps"] = [scandump(r, fam, key) for key, fam in FILTERS]
    ttl = r.pttl("bf:ttl")
    assert 0 < ttl <= 3600000, ttl
    fp["wf_items"] = r.execute_command("WF.INFO", "wf:a", "ITEMS")
    return fp


def same(before, after):
    a, b = before["answers"], after["answers"]
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        assert x == y, "answer %d differs: %r != %r" % (i, x, y)
    for (key, _), x, y in zip(FILTERS, before["dumps"], after["dumps"]):
        assert x == y, "SCANDUMP of %s differs (%d vs %d bytes)" % (key, len(x), len(y))
    assert before["wf_items"] == after["wf_items"]


def finish_load(r, dump, half):
    """The load in progress still takes its second half and completes."""
    assert r.type("bf:part") == b"bkloading", r.type("bf:part")
    assert r.execute_command("BF.LOADCHUNK", "bf:part", len(dump), dump[half:]) in (b"OK", True)
    assert r.type("bf:part") == b"bkbloom--"
    assert scandump(r, "BF", "bf:part") == dump


def cycle_save_restart():
    with Server() as srv:
        r = srv.client()
        dump, half = populate(r)
        before = fingerprint(r)
        assert r.save()
        assert srv.stop() == 0
        srv.start()
        r = srv.client()
        assert "bloomkit" in srv.log()
        same(before, fingerprint(r))
        finish_load(r, dump, half)


def cycle_debug_reload():
    with Server() as srv:
        r = srv.client()
        dump, half = populate(r)
        before = fingerprint(r)
        assert r.execute_command("DEBUG", "RELOAD") in (b"OK", True)
        same(before, fingerprint(r))
        assert r.execute_command("DEBUG", "RELOAD") in (b"OK", True)  # twice
        same(before, fingerprint(r))
        finish_load(r, dump, half)


def cycle_aof_rewrite():
    with Server("--appendonly", "yes", "--aof-use-rdb-preamble", "no",
                "--appendfsync", "always") as srv:
        r = srv.client()
        modutil.wait_rewrite(r)  # the initial rewrite of an empty keyspace
        dump, half = populate(r)
        r.bgrewriteaof()
        modutil.wait_rewrite(r)
        # commands after the rewrite: replayed from the AOF's increment
        r.execute_command("BF.MADD", "bf:grow", *ITEMS[1500:1600])
        r.execute_command("CF.ADD", "cf:chain", "late")
        r.execute_command("CBF.DEL", "cbf:a", ITEMS[1])
        before = fingerprint(r)
        # the rewritten base file: *.LOADCHUNK commands, none bigger than 4 MiB
        base = [f for f in os.listdir(os.path.join(srv.dir, "appendonlydir"))
                if ".base." in f]
        assert len(base) == 1 and base[0].endswith(".aof"), base
        with open(os.path.join(srv.dir, "appendonlydir", base[0]), "rb") as f:
            text = f.read()
        assert text.count(b"BF.LOADCHUNK") >= 6 and b"CF.LOADCHUNK" in text
        assert b"CBF.LOADCHUNK" in text and b"WF.LOADCHUNK" in text
        stop_to_aof(srv)
        srv.start()
        r = srv.client()
        same(before, fingerprint(r))
        finish_load(r, dump, half)


def main():
    run = Runner("module persistence")
    run.check("SAVE and restart", cycle_save_restart)
    run.check("DEBUG RELOAD", cycle_debug_reload)
    run.check("BGREWRITEAOF and restart", cycle_aof_rewrite)
    run.finish()


if __name__ == "__main__":
    main()
