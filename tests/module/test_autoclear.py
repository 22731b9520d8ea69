#!/usr/bin/python3
"""bloomkit.so: AUTOCLEAR filters (issue 34) inside Redis. BF and CBF keys
that clear (and rotate) at a fill ratio answer the same, report the same
INFO and DUMP the same bytes after SAVE and restart, DEBUG RELOAD, and an
AOF rewrite (its LOADCHUNK replay), with adds logged after the rewrite's
base replayed in order so that a clear happens where it happened.

Run: /usr/bin/python3 tests/module/test_autoclear.py (BLOOMKIT_MODULE, and
REDIS_SERVER if not /usr/bin/redis-server). Prints "N passed, M failed".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
from harness import Runner, Server, expect_error  # noqa: E402

KEYS = {"bf": "BF", "bfr": "BF", "cbf": "CBF"}
PROBES = ["item:%d" % i for i in range(0, 8000, 3)] + ["miss:%d" % i for i in range(3000)]


def add(r, cmd, key, first, n):
    p = r.pipeline(transaction=False)
    for i in range(first, first + n):
        p.execute_command(cmd, key, "item:%d" % i)
    p.execute()


def populate(r):
    assert r.execute_command("BF.RESERVE", "bf", "0.01", "1000", "AUTOCLEAR", "0.5") in (b"OK", True)
    assert r.execute_command("BF.RESERVE", "bfr", "0.01", "1000", "AUTOCLEAR", "0.5",
                             "ROTATE") in (b"OK", True)
    assert r.execute_command("CBF.RESERVE", "cbf", "0.01", "1000", "AUTOCLEAR", "0.4",
                             "ROTATE") in (b"OK", True)
    for key, kind in KEYS.items():
        add(r, kind + ".ADD", key, 0, 6000)
    assert r.execute_command("CBF.DEL", "cbf", "item:5999") == 1


def fingerprint(r):
    out = []
    for key, kind in KEYS.items():
        out.append(r.execute_command(kind + ".MEXISTS", key, *PROBES))
        out.append(r.execute_command(kind + ".INFO", key))
        out.append(r.dump(key))
    return out


STATE = {}


def loaded(srv):
    r = srv.client()
    populate(r)
    info = r.execute_command("BF.INFO", "bfr", "CLEARS")
    assert info[0] >= 3, info
    STATE.update(before=fingerprint(r))
    return r


def late_write(srv, r):
    """Adds after the rewrite's base, through more clears: replayed from the
    increment in order."""
    for key, kind in KEYS.items():
        add(r, kind + ".ADD", key, 6000, 2000)
    STATE.update(before=fingerprint(r))


def same(r):
    assert fingerprint(r) == STATE["before"]


def errors():
    with Server() as srv:
        r = srv.client()
        expect_error(lambda: r.execute_command("BF.RESERVE", "e", "0.01", "10", "AUTOCLEAR", "2"),
                     "bad AUTOCLEAR ratio: a fill ratio in (0, 1], such as 0.5")
        expect_error(lambda: r.execute_command("BF.RESERVE", "e", "0.01", "10", "ROTATE"),
                     "ROTATE needs AUTOCLEAR")
        expect_error(lambda: r.execute_command("CBF.RESERVE", "e", "0.01", "10", "AUTOCLEAR",
                                               "0.5", "TYPE", "hier"),
                     "AUTOCLEAR applies to TYPE counting")
        assert r.exists("e") == 0


def main():
    run = Runner("module AUTOCLEAR")
    run.check("errors", errors)
    modutil.reload_checks(run, Server, loaded, same, after_rewrite=late_write)
    run.finish()


if __name__ == "__main__":
    main()
