#!/usr/bin/python3
"""Transactions on bloomkit-server: MULTI / EXEC / DISCARD / WATCH / UNWATCH
with Redis's semantics, through python-redis pipelines and raw RESP.

1. pipelines with transaction=True and False give the same answers;
2. a command refused while queueing (unknown, wrong arity, not allowed in a
   transaction) gives EXECABORT and nothing of the transaction runs;
   errors at run time are per-command replies and the rest runs;
3. Redis's texts: nested MULTI, EXEC / DISCARD without MULTI, WATCH inside
   MULTI; the aborted-EXEC null in RESP2 (*-1) and RESP3 (_);
4. WATCH: a change by another client (add, DEL, FLUSHALL, creation of a
   missing key, expiry after WATCH) aborts EXEC (WatchError); no change,
   UNWATCH, or a key already expired at WATCH time does not;
5. isolation: two counters changed together in transactions are always
   seen equal by transactions of other clients, under load;
6. the log: a transaction is one record; cutting that record (a crash in
   the middle of its append) loses all of it and nothing before it; and
   kill -9 during a stream of EXECs with appendfsync always leaves every
   transaction whole or absent, every acknowledged one whole.

Uses Debian's python3-redis. Every server started is killed at the end.
"""
import glob
import os
import sys
import threading
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Runner, Server  # noqa: E402
from resp3 import Conn, Err, Map, Null, Simple  # noqa: E402

run = Runner("test_transactions")
srv = Server("--appendfsync", "always", threads=2)
r = srv.client()


def pipelines():
    r.flushall()
    for tx in (True, False):
        key = "p:%d" % tx
        p = r.pipeline(transaction=tx)
        p.execute_command("BF.ADD", key, "a")
        p.execute_command("BF.MADD", key, "a", "b")
        p.execute_command("BF.EXISTS", key, "b")
        p.execute_command("CF.ADD", key + ":cf", "x")
        p.execute_command("CF.COUNT", key + ":cf", "x")
        assert p.execute() == [1, [0, 1], 1, 1, 1], tx
    # BF.ADDs in a row on one key are queued one by one (never run as a batch
    # before EXEC)
    p = r.pipeline()
    for item in ("a", "b", "a", "c"):
        p.execute_command("BF.ADD", "p:run", item)
    p.execute_command("BF.CARD", "p:run")
    assert p.execute() == [1, 1, 0, 1, 3]
    # the default pipeline is a transaction (MULTI/EXEC)
    with r.pipeline() as p:
        p.execute_command("BF.ADD", "p:default", "z")
        p.execute_command("BF.CARD", "p:default")
        assert p.execute() == [1, 1]


def execabort():
    r.flushall()
    c = Conn(srv.port)
    assert c.call("MULTI") == "OK"
    assert c.call("BF.ADD", "ab", "x") == Simple("QUEUED")
    e = c.call("NOSUCHCMD", "a")
    assert isinstance(e, Err) and e.startswith("ERR unknown command 'NOSUCHCMD'"), e
    assert c.call("BF.ADD", "ab") == Err(
        "ERR wrong number of arguments for 'bf.add' command")
    assert c.call("EXEC") == Err(
        "EXECABORT Transaction discarded because of previous errors.")
    assert r.exists("ab") == 0
    # not allowed inside a transaction: it would split the transaction's log
    assert c.call("MULTI") == "OK"
    assert c.call("BF.ADD", "ab", "x") == "QUEUED"
    assert c.call("SAVE") == Err("ERR Command not allowed inside a transaction")
    assert c.call("EXEC").startswith("EXECABORT")
    assert r.exists("ab") == 0
    # python-redis raises, and nothing ran
    p = r.pipeline()
    p.execute_command("BF.ADD", "ab2", "x")
    p.execute_command("BF.ADD", "ab2")
    try:
        p.execute()
        raise AssertionError("no error")
    except redis.exceptions.ResponseError as ex:
        assert "wrong number of arguments" in str(ex) or "EXECABORT" in str(ex), ex
    assert r.exists("ab2") == 0
    c.close()


def runtime_errors():
    r.flushall()
    r.execute_command("CF.ADD", "cfkey", "x")
    p = r.pipeline()
    p.execute_command("BF.ADD", "rt", "a")
    p.execute_command("BF.ADD", "cfkey", "a")        # WRONGTYPE at run time
    p.execute_command("BF.ADD", "rt", "b")
    out = p.execute(raise_on_error=False)
    assert out[0] == 1 and out[2] == 1, out
    assert isinstance(out[1], redis.exceptions.ResponseError), out
    assert "WRONGTYPE" in str(out[1])
    assert r.execute_command("BF.CARD", "rt") == 2


def error_texts():
    c = Conn(srv.port)
    assert c.call("EXEC") == Err("ERR EXEC without MULTI")
    assert c.call("DISCARD") == Err("ERR DISCARD without MULTI")
    assert c.call("MULTI") == "OK"
    assert c.call("MULTI") == Err("ERR MULTI calls can not be nested")
    assert c.call("WATCH", "k") == Err("ERR WATCH inside MULTI is not allowed")
    assert c.call("BF.ADD", "nest", "x") == "QUEUED"
    # neither of those errors aborts the transaction (as in Redis)
    assert c.call("EXEC") == [1]
    assert c.call("MULTI") == "OK"
    assert c.call("BF.ADD", "nest", "y") == "QUEUED"
    assert c.call("DISCARD") == "OK"
    assert r.execute_command("BF.EXISTS", "nest", "y") == 0
    assert c.call("EXEC") == Err("ERR EXEC without MULTI")
    assert c.call("MULTI", "x") == Err("ERR wrong number of arguments for 'multi' command")
    # an empty transaction, and the aborted-EXEC null in both protocols
    assert c.call("MULTI") == "OK"
    assert c.call("EXEC") == []
    other = srv.client()
    for proto, null in ((2, b"*-1\r\n"), (3, b"_\r\n")):
        assert c.call("HELLO", str(proto))
        assert c.call("WATCH", "w") == "OK"
        other.execute_command("BF.ADD", "w", "v%d" % proto)
        assert c.call("MULTI") == "OK"
        assert c.call("BF.ADD", "w", "z") == "QUEUED"
        assert c.raw_reply("EXEC") == null, proto
    assert r.execute_command("BF.EXISTS", "w", "z") == 0
    # RESP3 replies inside EXEC keep their types
    assert c.call("MULTI") == "OK"
    assert c.call("BF.ADD", "t3", "a") == "QUEUED"
    assert c.call("BF.INFO", "t3", "CAPACITY") == "QUEUED"
    got = c.call("EXEC")
    assert got[0] is True and isinstance(got[1], Map) and got[1].as_dict() == {
        "Capacity": 100}, got
    c.close()


def watch_conflict(change, aborts, prepare=None):
    r.flushall()
    r.execute_command("BF.ADD", "wk", "init")
    if prepare:
        prepare()
    other = srv.client()
    with r.pipeline() as p:
        p.watch("wk")
        change(other)
        p.multi()
        p.execute_command("BF.ADD", "wk", "mine")
        p.execute_command("BF.ADD", "side", "mine")
        try:
            res = p.execute()
            assert not aborts, "EXEC ran: %r" % res
            assert res == [1, 1]
        except redis.exceptions.WatchError:
            assert aborts, "EXEC aborted"
            assert r.exists("side") == 0
    other.close()


def watch_cases():
    watch_conflict(lambda o: o.execute_command("BF.ADD", "wk", "x"), True)
    watch_conflict(lambda o: o.delete("wk"), True)
    watch_conflict(lambda o: o.flushall(), True)
    watch_conflict(lambda o: o.pexpire("wk", 100000), True)
    watch_conflict(lambda o: o.execute_command("BF.ADD", "elsewhere", "x"), False)
    watch_conflict(lambda o: o.execute_command("BF.EXISTS", "wk", "x"), False)
    # an add of something already there changes nothing
    watch_conflict(lambda o: o.execute_command("BF.ADD", "wk", "init"), False)
    # a missing key created by another client
    r.flushall()
    with r.pipeline() as p:
        p.watch("fresh")
        r.execute_command("CF.ADD", "fresh", "x")
        p.multi()
        p.execute_command("CF.ADD", "fresh", "y")
        try:
            p.execute()
            raise AssertionError("not aborted")
        except redis.exceptions.WatchError:
            pass
    # UNWATCH forgets
    c = Conn(srv.port)
    assert c.call("WATCH", "u") == "OK"
    r.execute_command("BF.ADD", "u", "x")
    assert c.call("UNWATCH") == "OK"
    assert c.call("MULTI") == "OK"
    assert c.call("BF.ADD", "u", "y") == "QUEUED"
    assert c.call("EXEC") == [1]
    # a key that expires after WATCH aborts; one already expired at WATCH does not
    r.execute_command("BF.ADD", "ex1", "x")
    r.pexpire("ex1", 300)
    assert c.call("WATCH", "ex1") == "OK"
    time.sleep(0.5)
    assert c.call("MULTI") == "OK"
    assert c.call("BF.ADD", "ex1", "y") == "QUEUED"
    assert c.call("EXEC") == Null("*")
    r.execute_command("BF.ADD", "ex2", "x")
    r.pexpire("ex2", 100)
    time.sleep(0.3)
    assert c.call("WATCH", "ex2") == "OK"
    assert c.call("MULTI") == "OK"
    assert c.call("BF.ADD", "ex2", "y") == "QUEUED"
    assert c.call("EXEC") == [1]
    c.close()


def isolation():
    r.flushall()
    stop = time.time() + 4
    errors = []

    def writer(tag):
        cl = srv.client()
        i = 0
        while time.time() < stop:
            p = cl.pipeline()
            p.execute_command("CF.ADD", "iso:a", "%s%d" % (tag, i))
            p.execute_command("CF.ADD", "iso:b", "%s%d" % (tag, i))
            p.execute()
            i += 1

    def reader():
        cl = srv.client()
        n = 0
        while time.time() < stop:
            p = cl.pipeline()
            p.execute_command("CF.INFO", "iso:a")
            p.execute_command("CF.INFO", "iso:b")
            try:
                a, b = p.execute()
            except redis.exceptions.ResponseError:
                continue        # before the first add
            ia = a[a.index(b"Number of items inserted") + 1]
            ib = b[b.index(b"Number of items inserted") + 1]
            if ia != ib:
                errors.append((ia, ib))
            n += 1
        assert n > 10, n

    ts = [threading.Thread(target=writer, args=(t,)) for t in "xy"]
    ts.append(threading.Thread(target=reader))
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:5]


def logs(directory):
    return sorted(glob.glob(os.path.join(directory, "appendonly-*.log")),
                  key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0]))


def torn_record():
    with Server("--appendfsync", "always") as s:
        c = s.client()
        c.execute_command("BF.ADD", "before", "x")
        p = c.pipeline()
        for k in range(8):
            p.execute_command("BF.ADD", "tx:%d" % k, "x")
        p.execute()
        log = logs(s.dir)[-1]
        data = open(log, "rb").read()
        assert b"EXEC" in data, "no transaction record in the log"
        assert data.count(b"EXEC") == 1
        s.kill()
        size = os.path.getsize(log)
        # the transaction is the last record: cut it in the middle
        with open(log, "r+b") as f:
            f.truncate(size - 20)
        s.start()
        c = s.client()
        assert c.exists("before") == 1
        assert sum(c.exists("tx:%d" % k) for k in range(8)) == 0
        assert "dropping the last" in s.log() or "torn" in s.log(), s.log()[-2000:]
        # whole, it replays whole
        p = c.pipeline()
        for k in range(8):
            p.execute_command("CF.ADD", "tx2:%d" % k, "x")
        p.execute_command("DEL", "before")
        p.execute()
        s.kill()
        s.start()
        c = s.client()
        assert sum(c.exists("tx2:%d" % k) for k in range(8)) == 8
        assert c.exists("before") == 0


def kill_during_exec():
    keys = 12
    for rnd in range(4):
        with Server("--appendfsync", "always", threads=2) as s:
            acked = []
            stop = threading.Event()

            def client(tag):
                cl = s.client(socket_timeout=5)
                i = 0
                while not stop.is_set():
                    name = "%s%d" % (tag, i)
                    p = cl.pipeline()
                    for k in range(keys):
                        p.execute_command("BF.ADD", "%s:%d" % (name, k), "x")
                    try:
                        p.execute()
                    except (redis.exceptions.ConnectionError,
                            redis.exceptions.TimeoutError):
                        return
                    acked.append(name)
                    i += 1

            ts = [threading.Thread(target=client, args=(t,)) for t in "abc"]
            for t in ts:
                t.start()
            time.sleep(0.3 + 0.2 * rnd)
            s.kill()
            stop.set()
            for t in ts:
                t.join()
            s.start()
            c = s.client()
            names = set(k.decode().split(":")[0] for k in c.keys("*"))
            for name in names:
                have = sum(c.exists("%s:%d" % (name, k)) for k in range(keys))
                assert have == keys, "transaction %s: %d of %d keys" % (name, have, keys)
            for name in acked:
                assert name in names, "acknowledged transaction %s lost" % name
            assert len(acked) > 0


run.check("pipelines with and without transactions", pipelines)
run.check("EXECABORT: nothing runs", execabort)
run.check("runtime errors are per-command replies", runtime_errors)
run.check("Redis's error texts and nulls", error_texts)
run.check("WATCH conflicts", watch_cases)
run.check("transactions are isolated", isolation)
run.check("a torn transaction record is dropped whole", torn_record)
run.check("kill -9 during EXECs: all or nothing", kill_during_exec)
r.close()
assert srv.stop() == 0, srv.log()[-3000:]
run.finish()
