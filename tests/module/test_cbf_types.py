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


STATE = {}


def loaded(srv):
    """A Redis holding every kind, its answers taken as the reference."""
    r = srv.client()
    populate(r)
    STATE.update(before=fingerprint(r), late=[])
    return r


def late_write(srv, r):
    """A write logged after the rewrite's base: replayed from the increment."""
    r.execute_command("CBF.ADD", "c:dleft", "late")
    STATE.update(before=fingerprint(r), late=[("c:dleft", "late")])


def same(r):
    assert fingerprint(r) == STATE["before"]
    check_answers(r)
    for key, item in STATE["late"]:
        assert r.execute_command("CBF.EXISTS", key, item) == 1


def main():
    run = Runner("module CBF types")
    modutil.reload_checks(run, Server, loaded, same, after_rewrite=late_write)
    run.finish()


if __name__ == "__main__":
    main()
