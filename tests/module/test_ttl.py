#!/usr/bin/python3
"""bloomkit.so: TF.* per-item TTL filters inside Redis.

The checks of tests/server/test_ttl.py (mixed TTLs on the real clock,
every error text, TF.INFO, DUMP/RESTORE and SCANDUMP/LOADCHUNK copies)
through redis-server with the module, then the expiries across Redis's
own persistence: an item with a 1 s TTL added 0.3 s before a restart is
found until 1 s after its add and gone by 1.1 s (+ slack), after a
restart from the AOF alone (the adds were propagated as TF.ADDAT with the
absolute expiry, and Redis replays them at its new start time), from an
AOF rewrite (TF.LOADCHUNK of the filter, its clock included), from an RDB
snapshot, and after DEBUG RELOAD.

Run: /usr/bin/python3 tests/module/test_ttl.py (BLOOMKIT_MODULE, and
REDIS_SERVER if not /usr/bin/redis-server). Prints "N passed, M failed".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
from harness import Runner, Server, stop_to_aof  # noqa: E402
import test_ttl as tt  # noqa: E402  (tests/server, on the path via modutil)

AOF = ("--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--appendfsync", "always")


def from_aof(srv, r):
    """Stop without a snapshot; start from the AOF alone."""
    logged = tt.log_records(srv)
    assert b"TF.ADDAT" in logged and b"TF.ADD\r\n" not in logged, logged[-400:]
    return from_aof_unchecked(srv)


def from_rewritten_aof(srv, r):
    r.bgrewriteaof()
    modutil.wait_rewrite(r)
    assert b"TF.LOADCHUNK" in tt.log_records(srv)
    return from_aof_unchecked(srv)


def from_aof_unchecked(srv):
    stop_to_aof(srv)
    srv.start()
    return srv.client()


def debug_reload(srv, r):
    assert r.execute_command("DEBUG", "RELOAD") in (b"OK", True)
    return r


def main():
    run = Runner("module TF")
    tt.run_core(run, Server)
    run.check("restart from the AOF keeps expiries", tt.restart_keeps_expiry(from_aof, *AOF))
    run.check("restart from a rewritten AOF keeps expiries",
              tt.restart_keeps_expiry(from_rewritten_aof, *AOF))
    run.check("SAVE and restart keeps expiries", tt.restart_keeps_expiry(tt.saved))
    run.check("DEBUG RELOAD keeps expiries", tt.restart_keeps_expiry(debug_reload))
    run.finish()


if __name__ == "__main__":
    main()
