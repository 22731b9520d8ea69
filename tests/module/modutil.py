"""modutil.py - what the module tests share.

The module under test is $BLOOMKIT_MODULE (CTest sets it to the build's
bloomkit.so), else build/release/module/bloomkit.so. redis-server,
redis-cli and python3-redis are dependencies (scripts/install-deps.sh):
a missing one is a failure, never a skip. Servers are started through
tests/server/harness.py, whose Server() runs redis-server with the module
when $BLOOMKIT_MODULE is set.
"""
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SERVER_TESTS = os.path.join(ROOT, "tests", "server")
sys.path.insert(0, SERVER_TESTS)

MODULE = os.environ.get("BLOOMKIT_MODULE") or os.path.join(
    ROOT, "build", "release", "module", "bloomkit.so")
os.environ["BLOOMKIT_MODULE"] = MODULE  # before harness is imported

REDIS_SERVER = os.environ.get("REDIS_SERVER") or "/usr/bin/redis-server"


def require():
    """Exit 1 (a failure) when something the module tests need is missing."""
    missing = []
    if not os.path.isfile(MODULE):
        missing.append("the module %s (build it: make)" % MODULE)
    if not os.access(REDIS_SERVER, os.X_OK):
        missing.append("redis-server (scripts/install-deps.sh)")
    if shutil.which("redis-cli") is None:
        missing.append("redis-cli (scripts/install-deps.sh)")
    if missing:
        print("module tests cannot run, missing: " + "; ".join(missing))
        sys.exit(1)


def server_suite(name, timeout=600):
    """Run tests/server/NAME, unchanged, as a child with this environment
    (BLOOMKIT_MODULE set: its servers are redis-server with the module);
    True when it passed. A suite exits 2 when it could not start a server:
    any non-zero status is a failure here."""
    suite = os.path.join(SERVER_TESTS, name)
    return subprocess.run([sys.executable, suite], env=os.environ,
                          timeout=timeout).returncode == 0


def run_server_suite(name, timeout=600):
    """require(), then exit with server_suite(name, timeout)'s verdict (0
    or 1): the whole of a module test that runs a server suite as it is."""
    require()
    sys.exit(0 if server_suite(name, timeout) else 1)


def wait_rewrite(r, timeout=60):
    """Wait until Redis has no AOF rewrite running or scheduled, and check
    that the last one succeeded (AssertionError after `timeout` seconds)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        info = r.info("persistence")
        if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
            assert info["aof_last_bgrewrite_status"] == "ok", info
            return
        time.sleep(0.05)
    raise AssertionError("BGREWRITEAOF did not finish")


def after_aof_rewrite(Server, load, check, rewrite=True, after=None):
    """load(srv) on a Redis that logs every write, BGREWRITEAOF (unless not
    `rewrite`: the commands as logged), after(srv, client) if given (writes
    that go to the log after the rewrite's base, checks of the base), stop
    without a snapshot (and remove any), start from the AOF alone, then
    check(client)."""
    from harness import stop_to_aof  # harness after BLOOMKIT_MODULE is set
    with Server("--appendonly", "yes", "--aof-use-rdb-preamble", "no",
                "--appendfsync", "always") as srv:
        r = srv.client()
        wait_rewrite(r)
        load(srv)
        if rewrite:
            r.bgrewriteaof()
            wait_rewrite(r)
        if after is not None:
            after(srv, r)
        stop_to_aof(srv)
        srv.start()
        check(srv.client())



def reload_checks(run, Server, load, check, after_rewrite=None):
    """The checks every module type's data must pass across Redis's own
    persistence: load(srv) (returning a client) on a fresh Redis, then
    check(client) after DEBUG RELOAD (an RDB save and load in place), after
    SAVE and a restart, and after BGREWRITEAOF (then after_rewrite(srv,
    client), see after_aof_rewrite) and a restart from the AOF alone; each
    reported through run (a harness.Runner)."""
    def debug_reload():
        with Server() as srv:
            r = load(srv)
            assert r.execute_command("DEBUG", "RELOAD") in (b"OK", True)
            check(r)

    def save_restart():
        with Server() as srv:
            r = load(srv)
            assert r.save()
            assert srv.stop() == 0
            srv.start()
            check(srv.client())

    run.check("DEBUG RELOAD", debug_reload)
    run.check("SAVE and restart", save_restart)
    run.check("BGREWRITEAOF and restart",
              lambda: after_aof_rewrite(Server, load, check, after=after_rewrite))


def server_checks(run, Server, make, more, check):
    """A tests/server module's (srv, r) functions run inside Redis with the
    module: "core checks" is make(srv, r) on a fresh Redis, then each of
    more on it, and Redis stopping cleanly; then the reload_checks of what
    make wrote, which check(client) must find as it was."""
    def load(srv):
        r = srv.client()
        make(srv, r)
        return r

    def core():
        with Server() as srv:
            r = load(srv)
            for fn in more:
                fn(srv, r)
            assert srv.stop() == 0

    run.check("core checks", core)
    reload_checks(run, Server, load, check)
