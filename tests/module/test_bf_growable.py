#!/usr/bin/python3
"""bloomkit.so: BF keys an add creates are growable filters (issue 12).

The checks of tests/server/test_bf_growable.py inside Redis (BF.INFO as
RedisBloom's chain would report it, every item present, the rate under 1%,
DUMP/RESTORE, SCANDUMP/LOADCHUNK, BF.MERGE), then the same answers and
BF.INFO after DEBUG RELOAD (RDB save and load of the bkbloom-- type), SAVE
and restart, and an AOF rewrite.

Run: /usr/bin/python3 tests/module/test_bf_growable.py (BLOOMKIT_MODULE, and
REDIS_SERVER if not /usr/bin/redis-server). Prints "N passed, M failed".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
from harness import Runner, Server, stop_to_aof  # noqa: E402
import test_bf_growable as g  # noqa: E402  (tests/server, on the path via modutil)


def aof_under_other_setting():
    """The AOF holds how each add made its key (BF.RESERVE ... GROWABLE):
    loaded by a Redis whose module says BF_GROWABLE 0, the keys and a merge
    between them come back as they were."""
    from test_loadargs import ArgsServer
    srv = ArgsServer([], "--appendonly", "yes", "--appendfsync", "always")
    with srv:
        r = srv.client()
        modutil.wait_rewrite(r)
        r.execute_command("BF.MADD", "a", *g.items("a", 500))
        r.execute_command("BF.MADD", "b", *g.items("b", 3000))
        assert r.execute_command("BF.MERGE", "a", "b") in (b"OK", True)
        before = g.info(r, "a")
        stop_to_aof(srv)
        srv.modargs = ["BF_GROWABLE", "0"]
        srv.start()
        r = srv.client()
        assert g.info(r, "a") == before, (g.info(r, "a"), before)
        assert all(r.execute_command("BF.MEXISTS", "a", *g.items("b", 3000)))
        r.execute_command("BF.ADD", "new", "x")  # made now: a chain
        assert g.info(r, "new")[b"Size"] == 240
        assert srv.stop() == 0


def main():
    run = Runner("module growable BF")
    modutil.server_checks(run, Server, g.grows_with_redisbloom_info, (g.copies, g.merge, g.concurrent_adds),
                          lambda r: g.check_same(r, "g"))
    run.check("AOF loaded with BF_GROWABLE 0", aof_under_other_setting)
    run.finish()


if __name__ == "__main__":
    main()
