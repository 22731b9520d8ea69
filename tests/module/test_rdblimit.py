#!/usr/bin/python3
"""A Redis snapshot with the module never needs an allocation the size of a
filter (issue 19, part 5).

A module's rdb_save cannot report failure: if it needed a buffer as large
as the filter and could not get one, Redis would report the BGSAVE as ok
and write a dump it then refuses to load. The module streams each value
in bounded pieces instead. The test fills a ~100 MB filter, limits the
address space of redis-server (RLIMIT_AS, which the snapshot child
inherits) to well under one more copy of the filter, runs BGSAVE, and
checks that the status is ok and that a restart from that dump brings the
filter back. Registered only in the optimised build: the sanitizers'
shadow memory does not fit under an address-space limit.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
from harness import Runner, Server, proc_status  # noqa: E402

run = Runner("test_rdblimit")
MiB = 1 << 20


def vm_size(pid):
    return proc_status(pid, "VmSize")


def info_field(r, section, name):
    return r.info(section)[name]


def bgsave_under_address_limit():
    srv = Server()
    try:
        r = srv.client()
        r.execute_command("BF.RESERVE", "big", "0.0001", "40000000", "NONSCALING")
        items = ["item:%d" % i for i in range(20000)]
        for i in range(0, len(items), 1000):
            r.execute_command("BF.MADD", "big", *items[i:i + 1000])
        size = int(r.execute_command("BF.INFO", "big", "SIZE")
                   if not isinstance(r.execute_command("BF.INFO", "big", "SIZE"), list)
                   else r.execute_command("BF.INFO", "big", "SIZE")[0])
        assert size > 64 * MiB, size
        pid = srv.proc.pid
        # room for small allocations, far less than a second copy of the filter
        limit = vm_size(pid) + size // 3
        subprocess.run(["prlimit", "--pid", str(pid), "--as=%d:unlimited" % limit],
                       check=True)
        assert r.execute_command("BGSAVE") in (b"Background saving started", "Background saving started",
                                               True, b"OK", "OK")
        deadline = time.time() + 60
        while info_field(r, "persistence", "rdb_bgsave_in_progress"):
            assert time.time() < deadline, "BGSAVE did not finish"
            time.sleep(0.1)
        status = info_field(r, "persistence", "rdb_last_bgsave_status")
        assert status == "ok", status
        log = srv.log()
        assert "cannot encode" not in log, log[-2000:]
        subprocess.run(["prlimit", "--pid", str(pid), "--as=unlimited:unlimited"], check=True)
        # restart from exactly that dump (SIGKILL: no new save on the way out)
        srv.kill()
        srv.start()
        r = srv.client()
        assert r.exists("big") == 1, srv.log()[-2000:]
        got = r.execute_command("BF.MEXISTS", "big", *items)
        assert all(int(x) == 1 for x in got)
        srv.stop()
    finally:
        srv.kill()


run.check("BGSAVE of a 100 MB filter under RLIMIT_AS, then restart", bgsave_under_address_limit)
run.finish()
