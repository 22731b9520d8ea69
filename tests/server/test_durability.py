#!/usr/bin/python3
"""Durability of bloomkit-server's data directory (docs/PERSISTENCE.md).

    test_durability.py [path/to/bloomkit-server]    (or $BLOOMKIT_SERVER)

1. kill -9 under write load, 20 rounds, appendfsync always: every
   acknowledged BF.ADD / CF.ADD is present after each restart.
2. appendfsync everysec: after kill -9 at most about a second of
   acknowledged writes is missing.
3. A truncated log tail: a warning, the server starts, earlier writes stay.
4. A damaged byte in the middle of the log: start-up refused naming the file
   and offset; --repair-aof starts and keeps the writes before the damage.
5. A damaged snapshot: start-up refused naming the file.
6. BGSAVE, more writes, kill -9: all present; SAVE, restart: all present;
   automatic compaction under load does not block clients.

Uses Debian's python3-redis. Every server started is killed at the end.
"""
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from harness import Workers, current, flip_bytes  # noqa: E402


def find_server():
    if len(sys.argv) > 1:
        return sys.argv[1]
    for var in ("BLOOMKIT_SERVER", "BKS_SERVER"):   # the former is CTest's
        if os.environ.get(var):
            return os.environ[var]
    for build in ("release", "asan", "tsan"):
        p = os.path.join(ROOT, "build", build, "server", "bloomkit-server")
        if os.path.exists(p):
            return p
    sys.exit("test_durability: bloomkit-server not found (pass its path)")


SERVER = find_server()
PROCS = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """One bloomkit-server process on a data directory."""

    def __init__(self, datadir, *flags):
        self.datadir = datadir
        self.port = free_port()
        self.errpath = os.path.join(os.path.dirname(datadir), "stderr-%d.txt" % self.port)
        self.errfile = open(self.errpath, "w")
        self.proc = subprocess.Popen(
            [SERVER, "--port", str(self.port), "--dir", datadir] + list(flags),
            stdout=subprocess.DEVNULL, stderr=self.errfile)
        PROCS.append(self.proc)

    def stderr(self):
        self.errfile.flush()
        with open(self.errpath) as f:
            return f.read()

    def wait_ready(self, timeout=20.0):
        """True once it answers PING; False if it exited first."""
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                return False
            try:
                if self.client().ping():
                    return True
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("server did not start within %.0f s:\n%s" % (timeout, self.stderr()))

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=30)

    def kill9(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.errfile.close()


def start(datadir, *flags):
    s = Server(datadir, *flags)
    if not s.wait_ready():
        raise AssertionError("server refused to start:\n" + s.stderr())
    return s


def live_log(datadir):
    return os.path.join(datadir, "appendonly-%d.log" % current(datadir)[1][-1])


class Writer(Workers):
    """Threads adding unique items; every acknowledged one is recorded."""

    def __init__(self, server, key, kinds=("bf", "cf"), threads=3, tag=""):
        super().__init__(threads)
        self.server, self.key, self.kinds = server, key, kinds
        self.tag = tag or key
        self.acked = {k: [] for k in kinds}
        self.ack_time = {}
        self.ended = None

    def run(self, t):
        try:
            r = self.server.client()
            i = 0
            while not self.stop.is_set():
                kind = self.kinds[i % len(self.kinds)]
                cmd = "BF.ADD" if kind == "bf" else "CF.ADD"
                # thread 0 pipelines 8 adds of one key at a time (the
                # server takes them as one run), the others send one by one
                items = ["%s-%d-%d-%d" % (self.tag, t, i, j) for j in range(8 if t == 0 else 1)]
                i += 1
                p = r.pipeline(transaction=False)
                for item in items:
                    p.execute_command(cmd, "%s:%s" % (kind, self.key), item)
                p.execute()
                with self.lock:
                    for item in items:
                        self.acked[kind].append(item)
                        self.ack_time[item] = time.time()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            # the server was killed: the last command was not acknowledged
            self.ended = "thread %d: %s" % (t, e)
        except redis.exceptions.ResponseError as e:
            self.error = "%s refused: %s" % (self.key, e)

    def __enter__(self):
        if "cf" in self.kinds:
            try:   # room for every item of the test (the default fills up)
                self.server.client().execute_command("CF.RESERVE", "cf:" + self.key, 4000000)
            except redis.exceptions.ResponseError:
                pass   # exists already
        return super().__enter__()


def missing(server, key, kind, items):
    r = server.client()
    cmd = "BF.MEXISTS" if kind == "bf" else "CF.MEXISTS"
    out = []
    for i in range(0, len(items), 1000):
        chunk = items[i:i + 1000]
        if not chunk:
            continue
        got = r.execute_command(cmd, key, *chunk)
        out += [it for it, g in zip(chunk, got) if g != 1]
    return out


def check_all(server, prefix, acked):
    for kind, items in acked.items():
        lost = missing(server, "%s:%s" % (kind, prefix), kind, items)
        assert not lost, "%d of %d acknowledged %s items lost, e.g. %s" % (
            len(lost), len(items), kind, lost[:3])


def test_kill9_always(base):
    d = os.path.join(base, "always")
    acked = {"bf": [], "cf": []}
    rounds = 20
    for rnd in range(rounds):
        s = start(d, "--appendfsync", "always", "--auto-aof-rewrite-min-size", "256kb")
        if rnd:
            check_all(s, "k", acked)
        with Writer(s, "k", threads=3, tag="k%d" % rnd) as w:
            # the first acknowledgement can take a while on a loaded CI
            # machine (each one waits for an fsync): wait for it, so every
            # round kills a server with acknowledged writes to lose
            first = time.time()
            while not any(w.acked.values()) and time.time() - first < 20:
                time.sleep(0.01)
            assert any(w.acked.values()), \
                "nothing acknowledged within 20 s in round %d (%s; %s)" % (
                    rnd, w.error, w.ended)
            time.sleep(random.uniform(0.2, 0.8))
            s.kill9()       # at a random moment under load
        for kind in acked:
            acked[kind] += w.acked[kind]
    s = start(d, "--appendfsync", "always")
    check_all(s, "k", acked)
    s.kill9()
    print("kill -9 x%d (always): %d BF + %d CF acknowledged writes, none lost"
          % (rounds, len(acked["bf"]), len(acked["cf"])))


def test_everysec(base):
    d = os.path.join(base, "everysec")
    s = start(d, "--appendfsync", "everysec")
    with Writer(s, "e", kinds=("bf",), threads=3) as w:
        time.sleep(1.5)
        killed_at = time.time()
        s.kill9()
    s = start(d, "--appendfsync", "everysec")
    lost = missing(s, "bf:e", "bf", w.acked["bf"])
    late = [it for it in lost if w.ack_time[it] < killed_at - 1.5]
    assert not late, "%d writes acknowledged more than ~1 s before the kill lost" % len(late)
    s.kill9()
    print("everysec: %d acknowledged, %d lost (all within the last second)"
          % (len(w.acked["bf"]), len(lost)))


def killed_after_adds(d, cmd, key, items, save=False):
    """A server on d, each item added by one command, a SAVE if asked,
    then SIGKILL."""
    s = start(d)
    r = s.client()
    for it in items:
        r.execute_command(cmd, key, it)
    if save:
        r.execute_command("SAVE")
    s.kill9()


def test_truncated_tail(base):
    d = os.path.join(base, "torn")
    items = ["t-%d" % i for i in range(500)]
    killed_after_adds(d, "BF.ADD", "bf:t", items)
    log = live_log(d)
    size = os.path.getsize(log)
    with open(log, "r+b") as f:
        f.truncate(size - 5)     # the last record loses its checksum's end
    s = start(d)
    assert "torn" in s.stderr(), "no warning about the torn record:\n" + s.stderr()
    lost = missing(s, "bf:t", "bf", items[:-1])
    assert not lost, "writes before the torn record lost: %s" % lost[:3]
    r = s.client()
    r.execute_command("BF.ADD", "bf:t", "after")
    s.kill9()
    s = start(d)
    assert not missing(s, "bf:t", "bf", items[:-1] + ["after"])
    s.kill9()
    print("truncated tail: warned, dropped the torn record, kept the rest")


def test_corrupt_middle(base):
    d = os.path.join(base, "corrupt")
    items = ["c-%d" % i for i in range(2000)]
    killed_after_adds(d, "BF.ADD", "bf:c", items)
    log = live_log(d)
    flip_bytes(log, os.path.getsize(log) // 2, 0xFF)
    s = Server(d)
    assert not s.wait_ready(), "started on a corrupt log"
    err = s.stderr()
    s.kill9()
    assert os.path.basename(log) in err and "offset" in err, \
        "the refusal does not name file and offset:\n" + err
    s = start(d, "--repair-aof")
    assert "repair" in s.stderr()
    # Records are ~60 bytes: everything in the first 45% of the file stays.
    lost = missing(s, "bf:c", "bf", items[:int(len(items) * 0.45)])
    assert not lost, "writes before the damage lost after repair: %s" % lost[:3]
    s.kill9()
    s = start(d)   # repaired for good
    s.kill9()
    print("corrupt log: refused with '%s', repaired with --repair-aof"
          % [l for l in err.splitlines() if "offset" in l][0].strip()[-90:])


def test_corrupt_snapshot(base):
    d = os.path.join(base, "snapcorrupt")
    killed_after_adds(d, "CF.ADD", "cf:s", ["s-%d" % i for i in range(300)], save=True)
    snap, _ = current(d)
    assert snap > 0, "SAVE made no snapshot"
    manifest = os.path.join(d, "snap-%d" % snap, "manifest")
    flip_bytes(manifest, os.path.getsize(manifest) // 2, 0x55)
    s = Server(d)
    assert not s.wait_ready(), "started on a corrupt snapshot"
    err = s.stderr()
    s.kill9()
    assert "manifest" in err and ("snap-%d" % snap) in err, "refusal does not name the file:\n" + err
    print("corrupt snapshot: refused naming snap-%d/manifest" % snap)


def test_snapshots(base):
    d = os.path.join(base, "snap")
    s = start(d, "--appendfsync", "always")
    r = s.client()
    items = ["b-%d" % i for i in range(1000)]
    for it in items[:500]:
        r.execute_command("CF.ADD", "cf:b", it)
        r.execute_command("BF.ADD", "bf:b", it)
    r.execute_command("BGSAVE")
    for it in items[500:]:
        r.execute_command("CF.ADD", "cf:b", it)
        r.execute_command("BF.ADD", "bf:b", it)
    time.sleep(0.5)
    s.kill9()
    s = start(d)
    check_all(s, "b", {"bf": items, "cf": items})
    r = s.client()
    r.execute_command("SAVE")
    s.kill9()
    s = start(d)
    check_all(s, "b", {"bf": items, "cf": items})
    s.kill9()

    # Automatic compaction under load: a probe measures the worst latency.
    d = os.path.join(base, "rewrite")
    s = start(d, "--appendfsync", "everysec", "--auto-aof-rewrite-min-size", "64kb",
              "--auto-aof-rewrite-percentage", "100")
    worst = [0.0]
    stop = threading.Event()

    def probe():
        pr = s.client()
        while not stop.is_set():
            t = time.time()
            pr.execute_command("CF.EXISTS", "cf:r", "x")
            worst[0] = max(worst[0], time.time() - t)
            time.sleep(0.002)

    pt = threading.Thread(target=probe, daemon=True)
    pt.start()
    with Writer(s, "r", kinds=("cf",), threads=3) as w:
        time.sleep(4)
    stop.set()
    pt.join(5)
    snap, logs = current(d)
    assert snap > 0, "no automatic compaction happened:\n" + s.stderr()[-2000:]
    assert worst[0] < 1.0, "a client waited %.3f s during compaction" % worst[0]
    s.kill9()
    s = start(d)
    check_all(s, "r", w.acked)
    s.kill9()
    print("snapshots: BGSAVE/SAVE keep everything; automatic compaction to snap-%d, "
          "worst probe latency %.1f ms" % (snap, worst[0] * 1000))


def main():
    base = tempfile.mkdtemp(prefix="bks-durability-")
    random.seed(int(os.environ.get("SEED", "1")))
    t0 = time.time()
    try:
        for test in (test_truncated_tail, test_corrupt_middle, test_corrupt_snapshot,
                     test_everysec, test_snapshots, test_kill9_always):
            test(base)
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
    shutil.rmtree(base, ignore_errors=True)
    print("test_durability: all passed in %.0f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
