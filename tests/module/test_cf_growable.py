#!/usr/bin/python3
"""bloomkit.so: CF keys an add creates are growable filters (issue 29).

The checks of tests/server/test_cf_growable.py inside Redis (50,000 items
into a key CF.ADD created, every add answering 1 where RedisBloom's chain
stops at about 31,000, every item found, the rate under 1%, copies
counted, CF.INFO, DUMP/RESTORE, SCANDUMP/LOADCHUNK), then the same answers
and CF.INFO after DEBUG RELOAD (RDB save and load of the bkcuckoo- type),
SAVE and restart, and an AOF rewrite; an AOF loaded by a Redis whose module
says CF_GROWABLE 0 brings the keys back as they were, while a key made then
is RedisBloom's chain.

Run: /usr/bin/python3 tests/module/test_cf_growable.py (BLOOMKIT_MODULE, and
REDIS_SERVER if not /usr/bin/redis-server). Prints "N passed, M failed".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
from harness import Runner, Server, stop_to_aof  # noqa: E402
import test_cf_growable as g  # noqa: E402  (tests/server, on the path via modutil)


def aof_under_other_setting():
    """The AOF holds how each add made its key (CF.INSERT ... GROWABLE):
    loaded by a Redis whose module says CF_GROWABLE 0, the keys come back
    as they were."""
    from test_loadargs import ArgsServer
    srv = ArgsServer([], "--appendonly", "yes", "--appendfsync", "always")
    with srv:
        r = srv.client()
        modutil.wait_rewrite(r)
        r.execute_command("CF.ADD", "a", "x")
        r.execute_command("CF.INSERTNX", "b", "ITEMS", *g.items("b", 3000))
        before = (g.info(r, "a"), g.info(r, "b"))
        stop_to_aof(srv)
        srv.modargs = ["CF_GROWABLE", "0"]
        srv.start()
        r = srv.client()
        after = (g.info(r, "a"), g.info(r, "b"))
        assert after == before, (after, before)
        assert all(r.execute_command("CF.MEXISTS", "b", *g.items("b", 3000)))
        r.execute_command("CF.ADD", "new", "x")  # made now: RedisBloom's chain
        got = g.info(r, "new")
        assert got[b"Number of buckets"] == 512 and got[b"Expansion rate"] == 1, got
        assert srv.stop() == 0


def main():
    run = Runner("module growable CF")
    modutil.server_checks(run, Server, g.never_full, (g.copies,),
                          lambda r: g.check_same(r, "c"))
    run.check("AOF loaded with CF_GROWABLE 0", aof_under_other_setting)
    run.finish()


if __name__ == "__main__":
    main()
