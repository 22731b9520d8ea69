#!/usr/bin/python3
"""The snapshot child and the data directory (issue 19, part 7):

- the data directory is created 0700 and every file in it 0600, whatever
  the umask (snapshots hold every key);
- a background snapshot child that hangs is killed after snapshot-timeout
  seconds, reported, and the next snapshot works;
- one that makes no progress (stopped) is killed after
  snapshot-stall-timeout seconds (default 60) without the server's tick
  ever blocking, while a child stopped for less than that is left alone;
- SHUTDOWN while a background snapshot runs (even a hung one) replaces it
  with its final snapshot (exit 0, the writes made after the fork survive).

A hung child is made by stopping it with SIGSTOP as soon as it appears.
"""
import os
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import MODULE, SERVER, Runner, Server, children  # noqa: E402

run = Runner("test_snapchild")


def catch_child(srv, timeout=10.0):
    """Start BGSAVE and stop its child at once; return the child's pid."""
    r = srv.client()
    r.bgsave()
    deadline = time.time() + timeout
    while time.time() < deadline:
        kids = children(srv.proc.pid)
        if kids:
            os.kill(kids[0], signal.SIGSTOP)
            return kids[0]
        time.sleep(0.0005)
    raise AssertionError("no snapshot child appeared")


def big_filter(r):
    # about 100 MB: its snapshot takes long enough to catch the child
    r.execute_command("BF.RESERVE", "big", "0.0001", "40000000", "NONSCALING")
    r.execute_command("BF.MADD", "big", *["i%d" % i for i in range(1000)])


def file_modes():
    import tempfile
    parent = tempfile.mkdtemp(prefix="bks-modes-")
    old = os.umask(0o022)
    try:
        d = os.path.join(parent, "data")
        srv = Server(dir=d)
        r = srv.client()
        r.execute_command("BF.ADD", "k", "x")
        r.save()
        assert srv.stop() == 0
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, oct(os.stat(d).st_mode)
        seen = 0
        for root, dirs, files in os.walk(d):
            for name in dirs:
                m = stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode)
                assert m == 0o700, (name, oct(m))
            for name in files:
                if name.endswith(".log") and root == d and name == "server.log":
                    continue
                p = os.path.join(root, name)
                if os.path.realpath(p) == os.path.realpath(srv.logfile):
                    continue
                m = stat.S_IMODE(os.stat(p).st_mode)
                assert m == 0o600, (p, oct(m))
                seen += 1
        assert seen >= 3, seen
    finally:
        os.umask(old)
        import shutil
        shutil.rmtree(parent, ignore_errors=True)


def is_gone(pid):
    """pid has exited and been reaped: not even a zombie is left."""
    return not os.path.exists("/proc/%d" % pid)


def wait_killed(srv, child, timeout):
    """Wait until the killed child is reaped and its failure reported (the
    status is set just after the reap); PING answers within 1 s all along:
    the tick never waits for the child."""
    quick = srv.client(socket_timeout=1)
    deadline = time.time() + timeout
    while not is_gone(child) or \
            quick.info("persistence")["rdb_last_bgsave_status"] != "err":
        assert time.time() < deadline, "the killed child is still there"
        t = time.time()
        assert quick.ping()
        assert time.time() - t < 1.0, "PING took %.2f s" % (time.time() - t)
        time.sleep(0.1)
    quick.close()


def killed_and_retried(flags, limit, timeout):
    """A server started with flags kills its stopped snapshot child past
    limit (the option's name, which its warning names), reaps it without
    blocking, reports the failure, and the next snapshot works."""
    srv = Server(*flags)
    try:
        r = srv.client()
        big_filter(r)
        child = catch_child(srv)
        wait_killed(srv, child, timeout)
        assert not children(srv.proc.pid), "the child is still there"
        assert limit in srv.log(), srv.log()[-1500:]
        assert r.info("persistence")["rdb_last_bgsave_status"] == "err"
        # the next snapshot works (its child, writing, is not a stall)
        last = r.lastsave()
        time.sleep(1.1)
        r.bgsave()
        deadline = time.time() + 30
        while r.lastsave() == last:
            assert time.time() < deadline, "no snapshot after the kill"
            time.sleep(0.1)
        # the status is ok again by the time LASTSAVE has moved
        assert r.info("persistence")["rdb_last_bgsave_status"] == "ok"
        assert srv.stop() == 0
    finally:
        srv.kill()


def hung_child_times_out():
    killed_and_retried(("--snapshot-timeout", "1"), "snapshot-timeout", 15)


def stalled_child_is_killed():
    killed_and_retried(("--snapshot-stall-timeout", "1"), "snapshot-stall-timeout", 10)


def brief_stop_is_not_a_stall():
    srv = Server("--snapshot-stall-timeout", "3")
    try:
        r = srv.client()
        big_filter(r)
        last = r.lastsave()
        time.sleep(1.1)
        child = catch_child(srv)
        time.sleep(0.5)
        os.kill(child, signal.SIGCONT)
        deadline = time.time() + 30
        while r.lastsave() == last:
            assert time.time() < deadline, "the snapshot did not complete"
            time.sleep(0.1)
        assert r.info("persistence")["rdb_last_bgsave_status"] == "ok"
        log = srv.log()
        assert "snapshot-stall-timeout" not in log and "no progress" not in log, log[-1500:]
        assert srv.stop() == 0
    finally:
        srv.kill()


def stall_timeout_default():
    # a bad value is refused at start, naming the option
    for bad in ("abc", "-1", "10kb", ""):
        p = subprocess.run([SERVER, "--snapshot-stall-timeout", bad], capture_output=True,
                           text=True, timeout=30)
        assert p.returncode != 0 and "'snapshot-stall-timeout' must be a whole number" in \
            p.stderr, (bad, p.returncode, p.stderr)
    srv = Server()
    try:
        r = srv.client()
        assert r.config_get("snapshot-stall-timeout") == {"snapshot-stall-timeout": "60"}
        assert r.config_get("snapshot-timeout") == {"snapshot-timeout": "3600"}
        assert srv.stop() == 0
    finally:
        srv.kill()


def shutdown_replaces_bgsave():
    srv = Server()
    try:
        r = srv.client()
        big_filter(r)
        child = catch_child(srv)
        r.execute_command("BF.ADD", "late", "after-the-fork")
        assert srv.stop() == 0, srv.log()[-2000:]
        assert "the final snapshot replaces it" in srv.log()
        assert not os.path.exists("/proc/%d" % child) or \
            open("/proc/%d/stat" % child).read().split(")")[1].split()[0] == "Z"
        # the final snapshot holds what came after the fork: start without
        # the log to be sure it is the snapshot that has it
        for name in os.listdir(srv.dir):
            if name.endswith(".log") and name.startswith("appendonly-"):
                assert os.path.getsize(os.path.join(srv.dir, name)) < 4096, name
        srv.start()
        r = srv.client()
        assert r.execute_command("BF.EXISTS", "late", "after-the-fork") == 1
        assert r.execute_command("BF.EXISTS", "big", "i7") == 1
        assert srv.stop() == 0
    finally:
        srv.kill()


if not MODULE:
    run.check("data directory 0700, files 0600", file_modes)
    run.check("a hung snapshot child is killed after snapshot-timeout", hung_child_times_out)
    run.check("a stalled snapshot child is killed after snapshot-stall-timeout, "
              "the server answering all along", stalled_child_is_killed)
    run.check("a child stopped briefly is not a stall", brief_stop_is_not_a_stall)
    run.check("snapshot-stall-timeout is 60 by default", stall_timeout_default)
    run.check("SHUTDOWN during a (hung) BGSAVE replaces it", shutdown_replaces_bgsave)
run.finish()
