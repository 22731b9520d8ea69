#!/usr/bin/python3
"""bloomkit.so: CBF.RESERVE ... TYPE (issue 15) inside Redis. Each counting
kind (dleft, varcount, hier, hybrid, morris) answers the same after SAVE
and restart, DEBUG RELOAD, and an AOF rewrite (its CBF.LOADCHUNK replay).

Run: /usr/bin/python3 tests/module/test_cbf_types.py (BLOOMKIT_MODULE, and
REDIS_SERVER if not /usr/bin/redis-server). Prints "N passed, M failed".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
from harness import Runner, Server  # noqa: E402

TYPES = ["dleft", "varcount", "hier", "hybrid", "morris"]
ITEMS = ["item:%d" % i for i in range(1500)]
PROBES = ITEMS[::5] + ["miss:%d" % i for i in range(1000)]


def populate(r):
    for t in TYPES:
        assert r.execute_command("CBF.RESERVE", "c:" + t, "0.01", "2000", "TYPE", t) in (b"OK", True)
        r.execute_command("CBF.MADD", "c:" + t, *ITEMS)
        r.execute_command("CBF.MADD", "c:" + t, *ITEMS[:50])
        if t != "morris":
            r.execute_command("CBF.DEL", "c:" + t, ITEMS[0])


def fingerprint(r):
    out = []
    for t in TYPES:
        out.append(r.execute_command("CBF.MEXISTS", "c:" + t, *PROBES))
        out.append([r.execute_command("CBF.COUNT", "c:" + t, it) for it in ITEMS[:60]])
        out.append(r.execute_command("CBF.INFO", "c:" + t))
    return out


def check_answers(r):
    """No item added and not removed is missed."""
    for t in TYPES:
        found = r.execute_command("CBF.MEXISTS", "c:" + t, *ITEMS[1:])
        assert found == [1] * (len(ITEMS) - 1), t


def cycle_save_restart():
    with Server() as srv:
        r = srv.client()
        populate(r)
        before = fingerprint(r)
        assert r.save()
        assert srv.stop() == 0
        srv.start()
        r = srv.client()
        assert fingerprint(r) == before
        check_answers(r)


def cycle_debug_reload():
    with Server() as srv:
        r = srv.client()
        populate(r)
        before = fingerprint(r)
        assert r.execute_command("DEBUG", "RELOAD") in (b"OK", True)
        assert fingerprint(r) == before


def cycle_aof_rewrite():
    with Server("--appendonly", "yes", "--aof-use-rdb-preamble", "no",
                "--appendfsync", "always") as srv:
        r = srv.client()
        modutil.wait_rewrite(r)
        populate(r)
        r.bgrewriteaof()
        modutil.wait_rewrite(r)
        r.execute_command("CBF.ADD", "c:dleft", "late")
        before = fingerprint(r)
        assert srv.stop(nosave=True) == 0
        rdb = os.path.join(srv.dir, "dump.rdb")
        if os.path.exists(rdb):
            os.unlink(rdb)
        srv.start()
        r = srv.client()
        assert fingerprint(r) == before
        assert r.execute_command("CBF.EXISTS", "c:dleft", "late") == 1


def main():
    run = Runner("module CBF types")
    run.check("SAVE and restart", cycle_save_restart)
    run.check("DEBUG RELOAD", cycle_debug_reload)
    run.check("BGREWRITEAOF and restart", cycle_aof_rewrite)
    run.finish()


if __name__ == "__main__":
    main()
