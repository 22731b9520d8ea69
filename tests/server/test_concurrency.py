#!/usr/bin/python3
"""Many clients adding to one filter at once (and creating keys at once);
afterwards every acknowledged item must be present. Labelled "threads":
the ThreadSanitizer build runs it, and a race report fails the server's
exit code."""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Runner, Server  # noqa: E402

run = Runner("test_concurrency")
srv = Server(threads=4)
CLIENTS = 16
PER_CLIENT = 1500


def parallel(fn, n=CLIENTS):
    errors = []

    def wrap(i):
        try:
            fn(i)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    ts = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in ts), "a client hung"
    assert not errors, errors[:3]


def one_filter_many_adders():
    srv.client().execute_command("BF.RESERVE", "shared", 0.001, 20000)
    acked = [None] * CLIENTS

    def adder(i):
        c = srv.client()
        mine = []
        # single adds, pipelined adds (coalesced server-side) and MADD
        for j in range(0, 300):
            item = "c%d-s%d" % (i, j)
            c.execute_command("BF.ADD", "shared", item)
            mine.append(item)
        p = c.pipeline(transaction=False)
        items = ["c%d-p%d" % (i, j) for j in range(600)]
        for item in items:
            p.execute_command("BF.ADD", "shared", item)
        p.execute()
        mine += items
        items = ["c%d-m%d" % (i, j) for j in range(600)]
        for k in range(0, 600, 100):
            c.execute_command("BF.MADD", "shared", *items[k:k + 100])
        mine += items
        acked[i] = mine
        c.close()
    parallel(adder)
    c = srv.client()
    missing = 0
    for mine in acked:
        for k in range(0, len(mine), 500):
            res = c.execute_command("BF.MEXISTS", "shared", *mine[k:k + 500])
            missing += res.count(0)
    assert missing == 0, "%d acknowledged items missing" % missing
    # BF.CARD counts each newly-added item once, so never more than the adds
    assert c.execute_command("BF.CARD", "shared") <= CLIENTS * PER_CLIENT


def scalable_growth_under_load():
    # a small filter that must grow (a new stage: WRITE lock) while others add
    srv.client().execute_command("BF.RESERVE", "grow", 0.01, 100, "EXPANSION", 2)
    acked = [None] * 8

    def adder(i):
        c = srv.client()
        items = ["g%d-%d" % (i, j) for j in range(2000)]
        p = c.pipeline(transaction=False)
        for it in items:
            p.execute_command("BF.ADD", "grow", it)
        p.execute()
        acked[i] = items
        c.close()
    parallel(adder, 8)
    c = srv.client()
    for items in acked:
        res = c.execute_command("BF.MEXISTS", "grow", *items)
        assert res.count(0) == 0
    info = c.execute_command("BF.INFO", "grow")
    d = dict(zip(info[::2], info[1::2]))
    assert d[b"Number of filters"] > 1, d


def racing_creators():
    # every client creates the same 50 new keys at the same time
    def creator(i):
        c = srv.client()
        for k in range(50):
            c.execute_command("BF.ADD", "race:%d" % k, "from-%d" % i)
            c.execute_command("CF.ADD", "racecf:%d" % k, "from-%d" % i)
        c.close()
    parallel(creator, 8)
    c = srv.client()
    for k in range(50):
        res = c.execute_command("BF.MEXISTS", "race:%d" % k, *["from-%d" % i for i in range(8)])
        assert res == [1] * 8, (k, res)
        assert c.execute_command("CF.COUNT", "racecf:%d" % k, "from-3") >= 1
    assert c.dbsize() >= 100


def cuckoo_concurrent():
    srv.client().execute_command("CF.RESERVE", "cf", 100000)

    def adder(i):
        c = srv.client()
        p = c.pipeline(transaction=False)
        for j in range(500):
            p.execute_command("CF.ADD", "cf", "x%d-%d" % (i, j))
        assert all(x == 1 for x in p.execute())
        c.close()
    parallel(adder, 8)
    c = srv.client()
    for i in range(8):
        res = c.execute_command("CF.MEXISTS", "cf", *["x%d-%d" % (i, j) for j in range(500)])
        assert res.count(0) == 0


def deletes_and_expiry_under_load():
    stop = threading.Event()

    def churn(i):
        c = srv.client()
        n = 0
        while not stop.is_set() and n < 300:
            k = "churn:%d" % (n % 10)
            c.execute_command("BF.ADD", k, "v%d" % n)
            if n % 7 == 0:
                c.delete(k)
            if n % 5 == 0:
                c.pexpire(k, 5)
            if n % 11 == 0:
                c.keys("churn:*")
            n += 1
        c.close()
    parallel(churn, 8)
    stop.set()
    assert srv.client().ping()


run.check("16 clients adding to one filter", one_filter_many_adders)
run.check("a filter growing while 8 clients add", scalable_growth_under_load)
run.check("8 clients creating the same keys at once", racing_creators)
run.check("cuckoo filter, 8 clients", cuckoo_concurrent)
run.check("deletes, expiry, KEYS under load", deletes_and_expiry_under_load)
rc = srv.stop()
run.check("clean exit (no sanitizer report)", lambda: None if rc == 0 else (_ for _ in ()).throw(
    AssertionError("exit code %d\n%s" % (rc, srv.log()[-20000:]))))
srv.close()
run.finish()
