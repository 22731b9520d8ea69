#!/usr/bin/python3
"""RS.* in real Redis with bloomkit.so: the set and exchange checks of
tests/server/test_keyset.py, then the "bkkeyset-" data type through
DEBUG RELOAD, SAVE + restart and BGREWRITEAOF + restart (the AOF rebuilt
by RS.LOADCHUNK commands), and `bloomkit diff` / `sync` between Redis and
bloomkit-server when the CLI and the server are built.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
import importlib.util  # noqa: E402
from harness import Runner, Server, stop_to_aof  # noqa: E402

# tests/server/test_keyset.py (this file has the same name: load it by path)
_spec = importlib.util.spec_from_file_location(
    "server_test_keyset", os.path.join(modutil.SERVER_TESTS, "test_keyset.py"))
ks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ks)

ITEMS = ["item:%d" % i for i in range(4000)]


def populate(r):
    ks.add_all(r, "rs:a", ITEMS)
    # most removed: the arena is compacted (in order) along the way
    r.execute_command("RS.REM", "rs:a", *ITEMS[:3000])
    r.execute_command("RS.RESERVE", "rs:seeded", "SEED", "12345")
    r.execute_command("RS.ADD", "rs:seeded", "x", "y", b"\x00\xff")
    r.execute_command("RS.RESERVE", "rs:empty")


def fingerprint(r):
    fp = []
    for key in ("rs:a", "rs:seeded", "rs:empty"):
        fp.append(r.type(key))
        fp.append(r.execute_command("RS.INFO", key, "SEED"))
        fp.append(r.execute_command("RS.CARD", key))
        fp.append(r.execute_command("DEBUG", "DIGEST-VALUE", key))
        fp.append(r.execute_command("RS.STRATA", key))
    fp.append(ks.members(r, "rs:a", ITEMS[2990:3010]))
    fp.append(r.execute_command("RS.ISMEMBER", "rs:seeded", b"\x00\xff"))
    return fp


def cycle_debug_reload():
    with Server() as srv:
        r = srv.client()
        populate(r)
        before = fingerprint(r)
        assert before[0] == b"bkkeyset-"
        assert ks.ok(r.execute_command("DEBUG", "RELOAD"))
        assert fingerprint(r) == before
        assert ks.ok(r.execute_command("DEBUG", "RELOAD"))
        assert fingerprint(r) == before
        # the reloaded set still works and reconciles with itself
        assert r.execute_command("RS.ADD", "rs:a", ITEMS[0]) == [1]
        assert r.execute_command("RS.DIFF", "rs:a",
                                 r.execute_command("RS.IBLT", "rs:a", 64)) == [[], []]


def cycle_save_restart():
    with Server() as srv:
        r = srv.client()
        populate(r)
        before = fingerprint(r)
        assert r.save()
        assert srv.stop() == 0
        srv.start()
        assert fingerprint(srv.client()) == before


def cycle_aof_rewrite():
    with Server("--appendonly", "yes", "--aof-use-rdb-preamble", "no",
                "--appendfsync", "always") as srv:
        r = srv.client()
        modutil.wait_rewrite(r)
        populate(r)
        r.bgrewriteaof()
        modutil.wait_rewrite(r)
        r.execute_command("RS.ADD", "rs:a", "late")       # replayed from the increment
        before = fingerprint(r)
        d = os.path.join(srv.dir, "appendonlydir")
        base = [f for f in os.listdir(d) if ".base." in f]
        assert len(base) == 1, base
        with open(os.path.join(d, base[0]), "rb") as f:
            assert f.read().count(b"RS.LOADCHUNK") >= 3
        stop_to_aof(srv)
        srv.start()
        assert fingerprint(srv.client()) == before


def cli_redis_and_server():
    """bloomkit diff/sync between Redis (the module) and bloomkit-server."""
    server_bin = os.environ.get("BLOOMKIT_SERVER")
    if not (os.path.exists(ks.CLI) and server_bin and os.path.exists(server_bin)):
        raise AssertionError("the CLI or bloomkit-server is not built")
    saved = os.environ.pop("BLOOMKIT_MODULE")
    import harness
    harness.MODULE = None
    try:
        plain = Server()
    finally:
        harness.MODULE = saved
        os.environ["BLOOMKIT_MODULE"] = saved
    with Server() as red, plain:
        rr, rp = red.client(), plain.client()
        ks.add_all(rr, "s", ITEMS[:3000] + ["redis-only"])
        ks.add_all(rp, "s", ITEMS[:3000] + ["server-only-1", "server-only-2"])
        A, B = "127.0.0.1:%d/s" % red.port, "127.0.0.1:%d/s" % plain.port
        p = subprocess.run([ks.CLI, "diff", A, B], capture_output=True, timeout=300)
        assert p.returncode == 1, p.stderr
        assert ks.diff_lines(p.stdout) == (["redis-only"], ["server-only-1", "server-only-2"])
        p = subprocess.run([ks.CLI, "sync", A, B], capture_output=True, timeout=300)
        assert p.returncode == 0, p.stderr
        assert rr.execute_command("RS.CARD", "s") == rp.execute_command("RS.CARD", "s") == 3003


def main():
    run = Runner("module keyset")
    ks.run_set_tests(run, Server)
    run.check("DEBUG RELOAD", cycle_debug_reload)
    run.check("SAVE and restart", cycle_save_restart)
    run.check("BGREWRITEAOF and restart", cycle_aof_rewrite)
    run.check("bloomkit diff/sync between Redis and bloomkit-server", cli_redis_and_server)
    run.finish()


if __name__ == "__main__":
    main()
