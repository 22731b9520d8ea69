#!/usr/bin/python3
"""A CF key in an RDB file written by the module before CF keys held one
filter of stages (its payload then had one cuckoo image per stage):
tests/golden/cf-chain-module.rdb, made by that version of bloomkit.so in
Debian's redis-server with CF.RESERVE k 50 BUCKETSIZE 2 EXPANSION 2;
CF.ADD item:0 .. item:389 (4 stages); CF.DEL item:0, item:4, ..., item:36;
CF.ADD item:1; SAVE. Redis loads it with today's module into one filter
with RedisBloom's CF.INFO figures and every item; after SAVE and a restart
(now one image of four parts) it still answers the same.
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
from harness import Runner, Server  # noqa: E402
# the server's test of its own old-format fixtures: the same key, the same checks
from test_cf_stages_snapshot import check_key  # noqa: E402

FIXTURE = os.path.join(modutil.ROOT, "tests", "golden", "cf-chain-module.rdb")


def loads():
    d = tempfile.mkdtemp(prefix="bk-cfrdb-")
    try:
        shutil.copyfile(FIXTURE, os.path.join(d, "dump.rdb"))
        with Server(dir=d) as srv:
            r = srv.client()
            check_key(r)
            r.execute_command("SAVE")
            srv.restart()
            r = srv.client()
            check_key(r)
            r.execute_command("DEBUG", "RELOAD")
            check_key(r)
            assert srv.stop() == 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    run = Runner("module_cf_stages_rdb")
    run.check("RDB with one image per stage", loads)
    run.finish()


if __name__ == "__main__":
    main()
