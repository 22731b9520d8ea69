#!/usr/bin/python3
"""TF.*: per-item TTL filters in bloomkit-server, on the real clock.

Filters of max TTL 1600 ms (granularity 100 ms: the table layout with 16
slots, and the generations layout with 17 generations) take items with
TTLs of 200 to 1500 ms; polled for 1.8 s, every item must be
found while its TTL runs (with 30 ms for the command's travel) and be gone
once TTL + granularity (+ 60 ms) have passed. The rate of the filters is
1e-4 at 1000 live items, holding at most a few dozen: a false positive in
these checks has a probability far below 1e-5. Then: every error text,
TF.INFO's fields, DUMP/RESTORE and SCANDUMP/LOADCHUNK copies answer like
the original, a full table refuses what it has no room for (an error per
item, nothing lost, the refused items not logged), and a restart (from the log alone after SIGKILL, and from a
snapshot) keeps each item's expiry: the log holds TF.ADDAT with the
absolute time, so an item added 0.3 s before the restart with a 1 s TTL is
still found until 1 s after its add and gone by 1.1 s.

tests/module/test_ttl.py runs the same checks through redis-server with
bloomkit.so (restart there: Redis's AOF, replayed at the new start time).

Run: /usr/bin/python3 tests/server/test_ttl.py ($BLOOMKIT_SERVER). Prints
"N passed, M failed".
"""
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import MODULE, Runner, Server, expect_error  # noqa: E402

GRAN = 100        # ms: max TTL 1600 / 16 slots, or / (17 - 1) generations
TRAVEL = 30       # ms a command may take to reach the server (before)
LATE = 60         # ms of slack after TTL + granularity (after)
# (redis-py drops the "ERR " that starts an error reply: the texts below
# are the server's without it)
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def now_ms():
    return time.time() * 1000.0


def reserve(r, key, capacity=1000, error=0.0001, max_ttl=1600, *extra):
    """A TF key; by default the table layout with 16 slots (GRAN)."""
    extra = extra or ("SLOTS", 16)
    assert r.execute_command("TF.RESERVE", key, error, capacity, max_ttl, *extra) in (b"OK", True)


class Timed:
    """Items added at known times: each (item, ttl) with the clock read
    just before the command was sent and just after it answered."""

    def __init__(self):
        self.items = []

    def add(self, r, key, item, ttl):
        before = now_ms()
        got = r.execute_command("TF.ADD", key, item, ttl)
        self.items.append((item, ttl, before, now_ms()))
        return got

    def madd(self, r, key, ttl, *items):
        before = now_ms()
        got = r.execute_command("TF.MADD", key, ttl, *items)
        after = now_ms()
        self.items += [(i, ttl, before, after) for i in items]
        return got

    def check(self, r, key):
        """One TF.MEXISTS of every item; returns (checked alive, checked
        gone). A miss or a stale item raises."""
        names = [i[0] for i in self.items]
        asked = now_ms()
        found = r.execute_command("TF.MEXISTS", key, *names)
        answered = now_ms()
        alive = gone = 0
        for (item, ttl, before, after), f in zip(self.items, found):
            if answered < before + ttl - TRAVEL:
                assert f == 1, "%s (TTL %d ms) missing %.0f ms after its add" % (
                    item, ttl, answered - before)
                alive += 1
            elif asked > after + ttl + GRAN + LATE:
                assert f == 0, "%s (TTL %d ms) still found %.0f ms after its add" % (
                    item, ttl, asked - after)
                gone += 1
        return alive, gone

    def watch(self, r, key, ms, step):
        """check() every `step` seconds for `ms` milliseconds: the summed
        (alive, gone) counts."""
        start = now_ms()
        alive = gone = 0
        while now_ms() - start < ms:
            a, g = self.check(r, key)
            alive += a
            gone += g
            time.sleep(step)
        return alive, gone


def mixed_ttls(srv, r, *layout):
    reserve(r, "t", 1000, 0.0001, 1600, *layout)
    t = Timed()
    ttls = [200, 350, 500, 700, 900, 1200, 1500]
    for ttl in ttls:
        for j in range(4):
            assert t.add(r, "t", "i%d:%d" % (ttl, j), ttl) == 1
    assert t.madd(r, "t", 800, "m1", "m2", "m3") == [1, 1, 1]
    # re-adding with a shorter TTL keeps the longer life (0: present)
    assert r.execute_command("TF.ADD", "t", "i1500:0", 100) == 0
    alive, gone = t.watch(r, "t", 1800, 0.04)
    # every item was seen alive and gone at least once
    assert alive >= len(t.items) * 2 and gone >= len(t.items), (alive, gone)
    assert r.execute_command("TF.EXISTS", "t", "never") == 0
    assert r.execute_command("TF.EXISTS", "missing", "x") == 0
    assert r.execute_command("TF.MEXISTS", "missing", "x", "y") == [0, 0]


def mixed_ttls_generations(srv, r):
    mixed_ttls(srv, r, "GENERATIONS", 17)


def errors(srv, r):
    reserve(r, "e")
    r.execute_command("BF.ADD", "bf", "x")
    cases = [
        (("TF.RESERVE", "e2", "x", 10, 100), "bad error rate"),
        (("TF.RESERVE", "e2", 2, 10, 100), "(0 < error rate range < 1) "),
        (("TF.RESERVE", "e2", 0.01, 0, 100), "(capacity should be larger than 0)"),
        (("TF.RESERVE", "e2", 0.01, "x", 100), "bad capacity"),
        (("TF.RESERVE", "e2", 0.01, 10, 0),
         "bad max TTL: a whole number of milliseconds, at least 1"),
        (("TF.RESERVE", "e2", 0.01, 10, "1s"),
         "bad max TTL: a whole number of milliseconds, at least 1"),
        (("TF.RESERVE", "e2", 0.01, 10, 315360000001),
         "bad max TTL: at most 315360000000 ms (10 years)"),
        (("TF.RESERVE", "e2", 0.01, 10, 100, "GENERATIONS", 1),
         "generations must be between 2 and 64"),
        (("TF.RESERVE", "e2", 0.01, 10, 100, "GENERATIONS", 65),
         "generations must be between 2 and 64"),
        (("TF.RESERVE", "e2", 0.01, 10, 100, "WINDOW", 3), "Unknown argument received"),
        (("TF.RESERVE", "e2", 0.01, 10, 100, "SLOTS", 0), "slots must be between 1 and 64"),
        (("TF.RESERVE", "e2", 0.01, 10, 100, "SLOTS", 65), "slots must be between 1 and 64"),
        (("TF.RESERVE", "e2", 0.01, 10, 100, "SLOTS", "x"), "slots must be between 1 and 64"),
        (("TF.RESERVE", "e2", 0.01, 10, 100, "SLOTS"),
         "wrong number of arguments for 'tf.reserve' command"),
        (("TF.RESERVE", "e2", 0.01, 10, 100, "SLOTS", 8, "GENERATIONS", 9),
         "GENERATIONS and SLOTS cannot be given together"),
        (("TF.RESERVE", "e2", 1e-12, 10, 100),
         "error rate too low for the TTL table layout: use GENERATIONS"),
        (("TF.RESERVE", "e", 0.01, 10, 100), "item exists"),
        (("TF.ADD", "e", "x", 0), "bad TTL: a whole number of milliseconds, at least 1"),
        (("TF.ADD", "e", "x", -5), "bad TTL: a whole number of milliseconds, at least 1"),
        (("TF.ADD", "e", "x", "1.5"), "bad TTL: a whole number of milliseconds, at least 1"),
        (("TF.ADD", "e", "x", 1601), "TTL 1601 ms exceeds the filter's max TTL of 1600 ms"),
        (("TF.MADD", "e", 0, "x"), "bad TTL: a whole number of milliseconds, at least 1"),
        (("TF.ADD", "nokey", "x", 10), "not found"),
        (("TF.MADD", "nokey", 10, "x"), "not found"),
        (("TF.ADD", "bf", "x", 10), WRONGTYPE),
        (("TF.INFO", "bf"), WRONGTYPE),
        (("TF.INFO", "nokey"), "not found"),
        (("TF.INFO", "e", "COLOUR"), "Invalid information value"),
        (("TF.ADDAT", "e", "soon", "x"),
         "bad expiry time: a whole number of milliseconds since the epoch"),
        (("TF.ADDAT", "e", int(now_ms()) + 3600000, "x"),
         "expiry time is more than the max TTL (1600 ms) after the filter's clock"),
        (("TF.ADD", "e", "x"), "wrong number of arguments for 'tf.add' command"),
        (("TF.MADD", "e", 10), "wrong number of arguments for 'tf.madd' command"),
    ]
    for args, text in cases:
        expect_error(lambda: r.execute_command(*args), text)
    assert not r.exists("e2")
    # an absolute expiry already past adds nothing
    assert r.execute_command("TF.ADDAT", "e", int(now_ms()) - 10, "old") == [0]
    assert r.execute_command("TF.EXISTS", "e", "old") == 0
    assert r.execute_command("TF.ADDAT", "e", int(now_ms()) + 500, "new") == [1]
    assert r.execute_command("TF.EXISTS", "e", "new") == 1
    assert r.type("e") == b"bkttl----"
    # lookups on another kind answer 0, as the other families' do
    assert r.execute_command("TF.EXISTS", "bf", "x") == 0


def info_fields(srv, r):
    reserve(r, "i", 5000, 0.01, 1600, "GENERATIONS", 9)
    r.execute_command("TF.MADD", "i", 150, "a", "b", "c")
    r.execute_command("TF.ADD", "i", "d", 1600)
    info = r.execute_command("TF.INFO", "i")
    if isinstance(info, list):
        info = dict(zip(info[::2], info[1::2]))
    want = {b"Capacity": 5000, b"Number of items inserted": 4, b"Live items": 4,
            b"Max TTL": 1600, b"Granularity": 200, b"Generations": 9, b"Segments": 9}
    for k, v in want.items():
        assert info[k] == v, (k, info[k], v)
    assert float(info[b"Error rate"]) == 0.01
    assert 0 < float(info[b"Error bound now"]) <= 0.01 * 4 / 5000 * 1.0001
    assert info[b"Size"] > 9 * 100
    assert r.execute_command("TF.INFO", "i", "MAXTTL") == [1600]
    assert r.execute_command("TF.INFO", "i", "GRANULARITY") == [200]
    # a, b, c expire by 150 + 200 ms: the live count drops at the clock
    time.sleep(0.45)
    assert r.execute_command("TF.INFO", "i", "LIVE") == [1]
    assert r.execute_command("TF.INFO", "i", "ITEMS") == [4]


def info_table(srv, r):
    # the default: the table, 12 slots (granularity ceil(1600 / 12))
    assert r.execute_command("TF.RESERVE", "d", 0.01, 3800, 1600) in (b"OK", True)
    r.execute_command("TF.MADD", "d", 1000, "a", "b", "c")
    info = r.execute_command("TF.INFO", "d")
    if isinstance(info, list):
        info = dict(zip(info[::2], info[1::2]))
    want = {b"Capacity": 3800, b"Number of items inserted": 3, b"Live items": 3,
            b"Max TTL": 1600, b"Granularity": 134, b"Generations": 0, b"Segments": 1,
            b"Slots": 12}
    for k, v in want.items():
        assert info[k] == v, (k, info[k], v)
    assert info[b"Layout"] in (b"table", "table"), info[b"Layout"]
    # 1000 buckets of 4 entries of 14 bits, and the handle
    assert 7000 < info[b"Size"] < 7000 + 1024, info[b"Size"]
    assert r.execute_command("TF.INFO", "d", "LAYOUT") in ([b"table"], ["table"])
    assert r.execute_command("TF.INFO", "d", "SLOTS") == [12]


def table_full(srv, r):
    """A table of capacity 100 takes a little more, then answers an error
    for each item it has no room for; what it took stays found, before
    and after a restart from the log (refused items are not logged)."""
    reserve(r, "f", 100, 0.01, 60000)
    items = ["full%d" % i for i in range(300)]
    got = r.execute_command("TF.MADD", "f", 60000, *items)
    taken = [it for it, g in zip(items, got) if not isinstance(g, Exception)]
    refused = [g for g in got if isinstance(g, Exception)]
    assert 100 <= len(taken) < 120 and len(refused) == 300 - len(taken), len(taken)
    for g in refused:
        assert "TTL filter is full: no room among its live items" in str(g), g
    expect_error(lambda: r.execute_command("TF.ADD", "f", "one-more", 100),
                 "TTL filter is full: no room among its live items "
                 "(reserve a larger capacity)")
    before = r.execute_command("TF.MEXISTS", "f", *items)
    assert all(before[i] == 1 for i, it in enumerate(items) if it in taken)
    logged = log_records(srv)
    assert b"one-more" not in logged
    srv.kill()
    srv.start()
    r = srv.client()
    assert r.execute_command("TF.MEXISTS", "f", *items) == before


def same_answers(r, a, b, items):
    assert r.execute_command("TF.MEXISTS", a, *items) == r.execute_command("TF.MEXISTS", b, *items)


def copies(srv, r):
    reserve(r, "c", 2000, 0.01)
    items = ["x%d" % i for i in range(300)]
    r.execute_command("TF.MADD", "c", 1500, *items[:150])
    r.execute_command("TF.MADD", "c", 300, *items[150:])
    probe = items + ["absent%d" % i for i in range(2000)]
    # DUMP / RESTORE
    payload = r.dump("c")
    assert r.restore("c:dumped", 0, payload)
    assert r.type("c:dumped") == b"bkttl----"
    same_answers(r, "c", "c:dumped", probe)
    # SCANDUMP / LOADCHUNK
    it = 0
    while True:
        it, data = r.execute_command("TF.SCANDUMP", "c", it)
        if it == 0:
            break
        r.execute_command("TF.LOADCHUNK", "c:chunked", it, data)
    same_answers(r, "c", "c:chunked", probe)
    # the copies keep the expiries: after 300 + 100 ms the short ones are gone
    time.sleep(0.3 + (GRAN + LATE) / 1000.0)
    for key in ("c", "c:dumped", "c:chunked"):
        got = r.execute_command("TF.MEXISTS", key, *items)
        assert got[:150] == [1] * 150 and got[150:] == [0] * 150, key
    # the copies take adds of their own
    assert r.execute_command("TF.ADD", "c:dumped", "fresh", 100) == 1
    assert r.execute_command("TF.EXISTS", "c", "fresh") == 0
    expect_error(lambda: r.execute_command("TF.SCANDUMP", "bf:none", 0), "not found")


def log_records(srv):
    """The bytes of the server's logs (bloomkit-server's appendonly-<G>.log,
    Redis's appendonlydir/*)."""
    data = b""
    for path in glob.glob(os.path.join(srv.dir, "appendonly*")) + \
            glob.glob(os.path.join(srv.dir, "appendonlydir", "*")):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                data += f.read()
    return data


def restart_keeps_expiry(restart, *flags):
    """An item with a 1 s TTL, added 0.3 s before the server goes down:
    after the restart it is found until 1 s after its add, gone by 1.1 s
    (+ LATE), as if nothing happened; a longer one (1.6 s) alike. A replay
    of "TF.ADD ... 1000" at the restart would keep it until 1.3 s and
    more."""
    def run():
        with Server(*flags) as srv:
            r = srv.client()
            reserve(r, "rp")
            t = Timed()
            t.add(r, "rp", "one-second", 1000)
            t.add(r, "rp", "long", 1600)
            time.sleep(0.3)
            r = restart(srv, r)
            # each item found while its TTL runs, whatever the restart took
            t.check(r, "rp")
            alive, gone = t.watch(r, "rp", 1200, 0.02)
            assert alive > 0 and gone > 0, (alive, gone)
    return run


def killed(srv, r):
    logged = log_records(srv)
    assert b"TF.ADDAT" in logged and b"TF.ADD\r\n" not in logged
    srv.kill()
    srv.start()
    return srv.client()


def saved(srv, r):
    assert r.save()
    srv.stop()
    srv.start()
    return srv.client()


CORE = [mixed_ttls, mixed_ttls_generations, errors, info_fields, info_table, copies]


def with_server(check):
    with Server() as srv:
        check(srv, srv.client())


def run_core(run, make_server):
    run.check_each(CORE, make_server)


def main():
    run = Runner("server ttl")
    run_core(run, Server)
    run.check("a full table refuses, loses nothing, logs only what it took",
              lambda: with_server(table_full))
    run.check("restart from the log after SIGKILL keeps expiries",
              restart_keeps_expiry(killed))
    run.check("restart from a snapshot keeps expiries", restart_keeps_expiry(saved))
    run.finish()


if __name__ == "__main__":
    assert not MODULE, "tests/module/test_ttl.py runs these through the module"
    main()
