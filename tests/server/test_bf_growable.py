#!/usr/bin/python3
"""BF keys an add creates are growable filters (issue 12): one cache line
per lookup however far they grow, seen from python-redis as RedisBloom's.

A key auto-created by BF.MADD with RedisBloom's defaults takes 20,000
items in a pipeline; BF.INFO must report Capacity and Number of filters as
RedisBloom's chain would for those items (100, 300, 700, ... 25,500: 8
filters), Number of items inserted equal to BF.CARD, Expansion rate 2;
every item must answer 1, and the absent items that answer 1 must stay
under the 1% asked for (3 sigma above it at most). The same answers and
BF.INFO after a restart from the log (SIGKILL), from a snapshot, after
DUMP/RESTORE and after SCANDUMP/LOADCHUNK. BF.MERGE of two growable keys
of different sizes holds both; into a BF.RESERVE'd key it is refused with
the reason. Four clients adding to one new key at once lose nothing,
while two more look keys up and read BF.INFO.
With --bf-growable no, a key BF.ADD creates is RedisBloom's 240-byte
chain again, while keys made before, replayed from the log, stay growable
(the log holds how each add made its key).

The functions taking (srv, r) also run inside Redis with bloomkit.so
(tests/module/test_bf_growable.py imports them).

Run with Debian's interpreter: /usr/bin/python3 tests/server/test_bf_growable.py
Prints "N passed, M failed"; exits non-zero on any failure.
"""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import redis  # noqa: E402
from redis.exceptions import ResponseError  # noqa: E402

N = 20000
ABSENT = 20000
RATE = 0.01


def items(prefix, n):
    return ["%s:%d" % (prefix, i) for i in range(n)]


def info(r, key, kind="BF"):
    plain = redis.Redis(connection_pool=r.connection_pool)  # no bf()/cf() callback
    reply = plain.execute_command(kind + ".INFO", key)
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[0::2], reply[1::2]))


def redisbloom_chain(n, first=100):
    """Capacity and filters of RedisBloom's chain holding n items."""
    stage, total, count = first, first, 1
    while total < n:
        stage *= 2
        total += stage
        count += 1
    return total, count


def madd(r, key, keys, chunk=1000):
    pipe = r.pipeline(transaction=True)
    for at in range(0, len(keys), chunk):
        pipe.execute_command("BF.MADD", key, *keys[at:at + chunk])
    return sum(sum(x) for x in pipe.execute())


def answers(r, key, kind="BF", n=N, absent=ABSENT):
    """(every item "in:0".."in:n-1" present, count of absent items answering
    1), by <kind>.MEXISTS."""
    pipe = r.pipeline(transaction=False)
    for at in range(0, n, 2000):
        pipe.execute_command(kind + ".MEXISTS", key, *items("in", n)[at:at + 2000])
    for at in range(0, absent, 2000):
        pipe.execute_command(kind + ".MEXISTS", key, *items("out", absent)[at:at + 2000])
    got = [v for part in pipe.execute() for v in part]
    return all(got[:n]), sum(got[n:])


EXPECTED = {}


def check_recorded(r, key, expected, answers, info):
    """answers(r, key) loses no item and finds the false positives recorded
    in expected["fp"]; info(r, key) is expected["info"] (test_cf_growable.py
    too)."""
    present, false_pos = answers(r, key)
    assert present, "an item was lost"
    assert false_pos == expected["fp"], (false_pos, expected["fp"])
    got = info(r, key)
    assert got == expected["info"], (got, expected["info"])


def check_same(r, key):
    check_recorded(r, key, EXPECTED, answers, info)


def restart_step(save, check, key):
    """A step restarting the server, check(r, key) then: restart_from_log
    (SIGKILL: the key comes back from the append-only log alone) or, with
    save, restart_from_snapshot (test_cf_growable.py too)."""
    from harness import restarted

    def step(srv, r):
        r = restarted(srv, r, save=save)
        check(r, key)
        return r
    step.__name__ = "restart_from_snapshot" if save else "restart_from_log"
    return step


# -- the tests ------------------------------------------------------------

def grows_with_redisbloom_info(srv, r):
    added = madd(r, "g", items("in", N))
    assert added >= N * (1 - RATE), added
    card = r.execute_command("BF.CARD", "g")
    assert card == added, (card, added)
    got = info(r, "g")
    capacity, filters = redisbloom_chain(card)
    assert got[b"Capacity"] == capacity and got[b"Number of filters"] == filters, got
    assert got[b"Number of items inserted"] == card and got[b"Expansion rate"] == 2, got
    assert 0 < got[b"Size"] < N * 8, got  # under 64 bits per item
    assert r.execute_command("MEMORY", "USAGE", "g") >= got[b"Size"]
    present, false_pos = answers(r, "g")
    assert present, "an item was lost"
    bound = ABSENT * RATE + 3 * (ABSENT * RATE * (1 - RATE)) ** 0.5
    assert false_pos <= bound, (false_pos, bound)
    EXPECTED["fp"] = false_pos
    EXPECTED["info"] = got
    # python-redis's own parser of BF.INFO
    parsed = r.bf().info("g")
    assert parsed.capacity == capacity and parsed.insertedNum == card


def copies(srv, r):
    """DUMP/RESTORE and SCANDUMP/LOADCHUNK: the same answers and INFO."""
    from harness import copies_check
    copies_check(r, "g", check_same, r.bf())


def merge(srv, r):
    r.execute_command("BF.MADD", "small", "s1", "s2", "in:0")
    assert r.execute_command("BF.MERGE", "small", "g") in (b"OK", True)
    present, _ = answers(r, "small")
    assert present
    assert r.execute_command("BF.MEXISTS", "small", "s1", "s2") == [1, 1]
    card = r.execute_command("BF.CARD", "small")
    assert card == EXPECTED["info"][b"Number of items inserted"] + 2, card
    r.execute_command("BF.RESERVE", "chain", "0.01", "100")
    try:
        r.execute_command("BF.MERGE", "chain", "g")
        raise AssertionError("a chain took a growable filter")
    except ResponseError as e:
        assert str(e) == "incompatible filters: family differs: scalable vs growable", str(e)
    r.delete("small", "chain")


def concurrent_adds(srv, r):
    errors = []

    def worker(w):
        try:
            c = srv.client()
            for at in range(0, 2000, 100):
                c.execute_command("BF.MADD", "together",
                                  *["w%d:%d" % (w, i) for i in range(at, at + 100)])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    stop = []

    def reader(n):
        """Lookups while the adds share the key and the table doubles under
        them: a key a client was told was added must be found from then on.
        A DUMP meanwhile must restore (the adds wait for it)."""
        try:
            c = srv.client()
            while not stop:
                c.execute_command("BF.MEXISTS", "together", "w0:0", "w1:0", "nothing")
                c.execute_command("BF.INFO", "together")
                c.restore("together-copy%d" % n, 0, c.dump("together"), replace=True)
                assert c.execute_command("BF.EXISTS", "together-copy%d" % n, "w0:0") == 1
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    r.execute_command("BF.ADD", "together", "w0:0")  # the readers find a key
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    readers = [threading.Thread(target=reader, args=(n,)) for n in range(2)]
    for t in threads + readers:
        t.start()
    for t in threads:
        t.join()
    stop.append(1)
    for t in readers:
        t.join()
    assert not errors, errors
    for w in range(4):
        got = r.execute_command("BF.MEXISTS", "together", *["w%d:%d" % (w, i) for i in range(2000)])
        assert all(got), "client %d lost an item" % w
    card = r.execute_command("BF.CARD", "together")
    assert 8000 * (1 - RATE) <= card <= 8000, card
    r.delete("together", "together-copy0", "together-copy1")


restart_from_log = restart_step(False, check_same, "g")
restart_from_snapshot = restart_step(True, check_same, "g")


def replay_under_other_setting(srv, r):
    """The log holds how each add made its key (BF.RESERVE ... GROWABLE):
    replayed with --bf-growable no, the keys and a merge between them come
    back as they were."""
    from harness import Server
    with Server() as s2:
        c = s2.client()
        c.execute_command("BF.MADD", "a", *items("a", 500))
        c.execute_command("BF.MADD", "b", *items("b", 3000))
        assert c.execute_command("BF.MERGE", "a", "b") in (b"OK", True)
        before = info(c, "a")
        s2.kill()
        s2.flags = ["--bf-growable", "no"]
        s2.start()
        c = s2.client()
        assert info(c, "a") == before, (info(c, "a"), before)
        assert all(c.execute_command("BF.MEXISTS", "a", *items("b", 3000)))
        assert all(c.execute_command("BF.MEXISTS", "a", *items("a", 500)))
        c.execute_command("BF.ADD", "new", "x")  # made now: a chain
        assert info(c, "new")[b"Size"] == 240
        assert s2.stop() == 0


def setting_off(srv, r):
    from harness import Server
    with Server("--bf-growable", "no") as s2:
        c = s2.client()
        c.execute_command("BF.ADD", "b", "x")
        assert info(c, "b")[b"Size"] == 240
        assert s2.stop() == 0


def main():
    from harness import run_steps
    return run_steps([grows_with_redisbloom_info, copies, merge,
                      concurrent_adds, restart_from_log, restart_from_snapshot,
                      replay_under_other_setting, setting_off])


if __name__ == "__main__":
    sys.exit(main())
