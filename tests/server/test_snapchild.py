#!/usr/bin/python3
"""The snapshot child and the data directory (issue 19, part 7):

- the data directory is created 0700 and every file in it 0600, whatever
  the umask (snapshots hold every key);
- a background snapshot child that hangs is killed after snapshot-timeout
  seconds, reported, and the next snapshot works;
- SHUTDOWN while a background snapshot runs (even a hung one) replaces it
  with its final snapshot (exit 0, the writes made after the fork survive).

A hung child is made by stopping it with SIGSTOP as soon as it appears.
"""
import os
import signal
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import MODULE, Runner, Server  # noqa: E402

run = Runner("test_snapchild")


def children(pid):
    """Child processes of pid, whichever of its threads forked them."""
    out = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


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


def hung_child_times_out():
    srv = Server("--snapshot-timeout", "1")
    try:
        r = srv.client()
        big_filter(r)
        child = catch_child(srv)
        deadline = time.time() + 15
        while time.time() < deadline and os.path.exists("/proc/%d" % child) and \
                open("/proc/%d/stat" % child).read().split(")")[1].split()[0] != "Z":
            time.sleep(0.1)
        time.sleep(0.3)
        assert not children(srv.proc.pid), "the hung child is still there"
        assert "snapshot-timeout" in srv.log(), srv.log()[-1500:]
        assert r.info("persistence")["rdb_last_bgsave_status"] == "err"
        # the next snapshot works
        last = r.lastsave()
        time.sleep(1.1)
        r.bgsave()
        deadline = time.time() + 30
        while r.lastsave() == last:
            assert time.time() < deadline, "no snapshot after the timeout"
            time.sleep(0.1)
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
    run.check("SHUTDOWN during a (hung) BGSAVE replaces it", shutdown_replaces_bgsave)
run.finish()
