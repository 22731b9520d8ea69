#!/usr/bin/python3
"""Disk faults under bloomkit-server's append-only log (docs/PERSISTENCE.md,
"Disk faults"), through the LD_PRELOAD library faultshim.c ($BKS_FAULTSHIM):

1. write() on the log fails with ENOSPC for 2 s, then fdatasync fails with
   EIO for 2 s (appendfsync always); under everysec the background
   fdatasync fails with EIO, then write() with EROFS (a read-only remount): during each fault writes answer MISCONF and reads are served,
   INFO persistence says aof_last_write_status:err with the fault's time;
   after it clears writes resume by themselves within a few seconds
   (status ok, "writes resume" in the log); after a kill -9 every
   acknowledged write is there.
2. Power loss with appendfsync always: kill -9 under load, every log cut
   back to the length its last successful fdatasync covered (the shim
   records it), restart: every acknowledged write is there. 5 rounds,
   with compactions (BGSAVE) happening meanwhile.
"""
import glob
import os
import random
import shutil
import tempfile
import time

import redis

from harness import Server, Runner, Workers, server_with_env
from harness import info_persistence as info
from harness import end_checked as end  # stop, fail on a sanitizer report

SHIM = os.environ.get("BKS_FAULTSHIM")



def shimmed(*flags, d, ctl=None, syncdir=None):
    """A server with the shim preloaded (environment set for it alone)."""
    env = {"LD_PRELOAD": SHIM}
    if ctl:
        env["BKS_FAULT_CTL"] = ctl
    if syncdir:
        env["BKS_SYNC_DIR"] = syncdir
    # A sanitized server must accept a library preloaded before its runtime.
    asan = os.environ.get("ASAN_OPTIONS", "")
    env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "verify_asan_link_order=0"
    return server_with_env(env, *flags, dir=d)


class Writer(Workers):
    """Threads adding unique items; acknowledged ones are kept, MISCONF
    refusals counted (and retried with the next item)."""

    join_timeout = 30

    def __init__(self, srv, key, threads=2, tag="w"):
        super().__init__(threads)
        self.srv, self.key, self.tag = srv, key, tag
        self.acked, self.refused, self.last_ok = [], 0, 0.0

    def run(self, t):
        r = self.srv.client(socket_timeout=30)
        i = 0
        try:
            while not self.stop.is_set():
                item = "%s-%d-%d" % (self.tag, t, i)
                i += 1
                try:
                    r.execute_command("BF.ADD", self.key, item)
                except redis.exceptions.ResponseError as e:
                    if not str(e).startswith("MISCONF"):
                        self.error = "unexpected error: " + str(e)
                        return
                    with self.lock:
                        self.refused += 1
                    time.sleep(0.005)
                    continue
                with self.lock:
                    self.acked.append(item)
                    self.last_ok = time.time()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            pass   # killed: the command in flight was not acknowledged


def missing(r, key, items):
    out = []
    for i in range(0, len(items), 500):
        chunk = items[i:i + 500]
        got = r.execute_command("BF.MEXISTS", key, *chunk)
        out += [it for it, g in zip(chunk, got) if g != 1]
    return out


def drop(ctl, d):
    """Clear the fault (its control file) and remove the data directory."""
    if os.path.exists(ctl):
        os.unlink(ctl)
    shutil.rmtree(d, ignore_errors=True)


def wait_for(cond, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("timed out (%.0f s) waiting for %s" % (timeout, what))


def one_fault(srv, w, ctl, fault, seconds=2.0):
    """Start fault, check the refusal, clear it, time the recovery."""
    r = srv.client()
    probe = w.acked[0]
    refused0 = w.refused
    t0 = time.time()
    with open(ctl, "w") as f:
        f.write(fault + "\n")
    wait_for(lambda: w.refused > refused0, 10, "MISCONF after '%s'" % fault)
    i = info(r)
    assert i["aof_last_write_status"] == "err", i
    assert abs(int(i["aof_last_write_error_time"]) - t0) <= 3, (i, t0)
    assert r.execute_command("BF.EXISTS", w.key, probe) == 1, "a read failed during the fault"
    try:
        r.execute_command("BF.ADD", w.key, "during-" + fault)
        raise AssertionError("a write was accepted during the fault")
    except redis.exceptions.ResponseError as e:
        assert str(e).startswith("MISCONF"), str(e)
    time.sleep(seconds)
    assert info(r)["aof_last_write_status"] == "err", "recovered while the fault lasted"
    os.unlink(ctl)
    cleared = time.time()
    wait_for(lambda: w.last_ok > cleared, 10, "writes to resume after '%s'" % fault)
    took = w.last_ok - cleared
    assert took < 7.0, "writes resumed %.1f s after the fault cleared" % took
    i = info(r)
    assert i["aof_last_write_status"] == "ok", i
    assert i["aof_last_bgrewrite_status"] == "ok", i
    return took


def test_faults():
    d = tempfile.mkdtemp(prefix="bks-faults-")
    ctl = os.path.join(tempfile.gettempdir(), "bks-fault-%d" % os.getpid())
    try:
        acked = []
        for mode, faults in (("always", ("write ENOSPC", "fsync EIO")),
                             ("everysec", ("fsync EIO", "write EROFS"))):
            srv = shimmed("--appendfsync", mode, d=d, ctl=ctl)
            took = []
            with Writer(srv, "bf:f", tag="f" + mode) as w:
                wait_for(lambda: len(w.acked) > 50, 10, "first writes")
                for fault in faults:
                    took.append(one_fault(srv, w, ctl, fault))
                time.sleep(0.3)
                assert "writes resume" in srv.log(), srv.log()
                end(srv)
            acked += w.acked
            print("  %s: %s cleared -> writes again after %s s; %d acknowledged, %d refused"
                  % (mode, " / ".join(faults), " / ".join("%.1f" % t for t in took),
                     len(w.acked), w.refused))
            s = Server(dir=d)
            lost = missing(s.client(), "bf:f", acked)
            assert not lost, "%d acknowledged writes lost, e.g. %s" % (len(lost), lost[:3])
            assert s.stop() == 0, "SHUTDOWN failed (or a sanitizer report):\n" + s.log()
            end(s)
    finally:
        drop(ctl, d)


def test_batch_refused():
    """The log write a pipeline's batch waits for fails: every write of the
    batch answers MISCONF (its record never reached the log), every read
    keeps its answer, and after the fault clears and a restart nothing the
    refusals covered is claimed."""
    d = tempfile.mkdtemp(prefix="bks-batch-")
    ctl = os.path.join(tempfile.gettempdir(), "bks-fault-b%d" % os.getpid())
    try:
        srv = shimmed("--appendfsync", "everysec", d=d, ctl=ctl)
        r = srv.client()
        assert r.execute_command("BF.ADD", "bf:b", "before") == 1
        assert r.execute_command("CF.ADD", "cf:b", "before") == 1
        with open(ctl, "w") as f:
            f.write("write ENOSPC\n")
        p = r.pipeline(transaction=False)
        p.execute_command("BF.EXISTS", "bf:b", "before")
        p.execute_command("BF.ADD", "bf:b", "x1")
        p.execute_command("BF.EXISTS", "bf:b", "nothing")
        p.execute_command("CF.ADD", "cf:b", "x2")
        p.execute_command("CF.EXISTS", "cf:b", "before")
        p.execute_command("BF.ADD", "bf:b", "x3")
        p.execute_command("BF.ADD", "bf:b", "x4")
        got = p.execute(raise_on_error=False)
        kinds = ["MISCONF" if isinstance(g, redis.exceptions.ResponseError) and
                 str(g).startswith("MISCONF") else g for g in got]
        assert kinds == [1, "MISCONF", 0, "MISCONF", 1, "MISCONF", "MISCONF"], got
        assert info(r)["aof_last_write_status"] == "err"
        os.unlink(ctl)
        wait_for(lambda: info(r)["aof_last_write_status"] == "ok", 15, "the log to recover")
        assert r.execute_command("BF.ADD", "bf:b", "after") == 1
        end(srv)
        s = Server(dir=d)
        c = s.client()
        assert c.execute_command("BF.EXISTS", "bf:b", "before") == 1
        assert c.execute_command("BF.EXISTS", "bf:b", "after") == 1
        assert c.execute_command("CF.EXISTS", "cf:b", "before") == 1
        assert s.stop() == 0, "SHUTDOWN failed (or a sanitizer report):\n" + s.log()
        end(s)
    finally:
        drop(ctl, d)


def synced_sizes(syncdir):
    out = {}
    for p in glob.glob(os.path.join(syncdir, "*.synced")):
        with open(p) as f:
            out[os.path.basename(p)[:-len(".synced")]] = int(f.read().strip() or 0)
    return out


def test_power_loss():
    d = tempfile.mkdtemp(prefix="bks-power-")
    syncdir = tempfile.mkdtemp(prefix="bks-synced-")
    rng = random.Random(18)
    acked, cut_total = [], 0
    try:
        for rnd in range(5):
            srv = shimmed("--appendfsync", "always", "--auto-aof-rewrite-min-size", "64kb",
                          d=d, syncdir=syncdir)
            if rnd:
                lost = missing(srv.client(), "bf:p", acked)
                assert not lost, "round %d: %d acknowledged writes lost, e.g. %s" % (
                    rnd, len(lost), lost[:3])
            with Writer(srv, "bf:p", threads=3, tag="p%d" % rnd) as w:
                time.sleep(rng.uniform(0.3, 0.8))
                if rnd % 2:
                    try:
                        srv.client().execute_command("BGSAVE")
                    except redis.exceptions.ResponseError as e:
                        assert "in progress" in str(e), str(e)   # a compaction runs
                    time.sleep(rng.uniform(0.0, 0.2))
                end(srv)
            assert w.acked, "nothing acknowledged in round %d" % rnd
            acked += w.acked
            # The power goes: every log loses what its last fdatasync did
            # not cover.
            sizes = synced_sizes(syncdir)
            for log in glob.glob(os.path.join(d, "appendonly-*.log")):
                name = os.path.basename(log)
                keep = sizes.get(name, 0)
                size = os.path.getsize(log)
                assert keep <= size, "%s: synced %d > size %d" % (name, keep, size)
                cut_total += size - keep
                with open(log, "r+b") as f:
                    f.truncate(keep)
        s = Server(dir=d)
        lost = missing(s.client(), "bf:p", acked)
        assert not lost, "%d acknowledged writes lost, e.g. %s" % (len(lost), lost[:3])
        end(s)
        print("  power loss x5 (always): %d acknowledged, none lost; %d unsynced bytes cut"
              % (len(acked), cut_total))
    finally:
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(syncdir, ignore_errors=True)


def main():
    run = Runner("test_faults")
    if not SHIM or not os.path.exists(SHIM):
        print("test_faults: $BKS_FAULTSHIM (the LD_PRELOAD shim) is not built: failing")
        run.failed += 1
        run.finish()
    run.check("log write/fsync faults: MISCONF, then writes resume", test_faults)
    run.check("a batch's log write fails: its writes MISCONF, its reads kept",
              test_batch_refused)
    run.check("power loss (always): logs cut to their last fdatasync", test_power_loss)
    run.finish()


if __name__ == "__main__":
    main()
