#!/usr/bin/python3
"""bloomkit.so next to a module that owns one of its command names (as
RedisBloom owns BF.* and CF.*): the load fails with a clear log line, the
commands bloomkit had registered before the clash are gone again, and
Redis keeps running (MODULE LOAD) or refuses to start (--loadmodule).
The other module is tests/module/clash_module.c ($BLOOMKIT_CLASH_MODULE).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
import redis  # noqa: E402
import harness  # noqa: E402
from harness import Runner, Server  # noqa: E402

CLASH = os.environ.get("BLOOMKIT_CLASH_MODULE") or os.path.join(
    os.path.dirname(modutil.MODULE), "clash_module.so")
LINE = "bloomkit: cannot register command 'cf.add': the name is taken"


def module_name(entry):
    """The name of one MODULE LIST entry: a map (RESP3) or a flat list of
    name/value pairs (RESP2)."""
    if isinstance(entry, dict):
        return entry.get(b"name", entry.get("name"))
    pairs = dict(zip(entry[0::2], entry[1::2]))
    return pairs.get(b"name", pairs.get("name"))


def runtime_load():
    harness.MODULE = CLASH  # start redis-server with the other module only
    try:
        srv = Server("--enable-module-command", "local")
    finally:
        harness.MODULE = modutil.MODULE
    with srv:
        r = srv.client()
        try:
            r.execute_command("MODULE", "LOAD", modutil.MODULE)
        except redis.exceptions.ResponseError:
            pass
        else:
            raise AssertionError("MODULE LOAD succeeded next to a clashing module")
        assert LINE in srv.log(), srv.log()[-2000:]
        assert r.execute_command("CF.ADD", "k", "x") in (b"clash", True, "clash")
        # BF.ADD was registered before the clash: unregistered again
        try:
            r.execute_command("BF.ADD", "k2", "x")
        except redis.exceptions.ResponseError as e:
            assert "unknown command" in str(e), str(e)
        else:
            raise AssertionError("BF.ADD left behind by a failed load")
        # only the names count: a path may contain "bloomkit" (the checkout's
        # directory), and the clashing module's path always does
        names = [module_name(m) for m in r.execute_command("MODULE", "LIST")]
        assert b"bloomkit" not in names, names
        assert r.ping()


def startup_load():
    harness.MODULE = CLASH  # loaded first, then bloomkit.so: refused
    try:
        srv = Server("--loadmodule", modutil.MODULE, wait=False)
    finally:
        harness.MODULE = modutil.MODULE
    with srv:
        rc = srv.proc.wait(timeout=30)
        assert rc != 0 and rc > 0, rc
        assert LINE in srv.log(), srv.log()[-2000:]


def main():
    if not os.path.isfile(CLASH):
        print("missing %s (built with the module when BK_TESTS is on)" % CLASH)
        sys.exit(1)
    run = Runner("module next to a clashing module")
    run.check("MODULE LOAD refused, Redis runs on", runtime_load)
    run.check("--loadmodule refused at startup", startup_load)
    run.finish()


if __name__ == "__main__":
    main()
