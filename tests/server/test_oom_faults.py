#!/usr/bin/python3
"""Allocation failures under load (issue 32), through the LD_PRELOAD library
libbks_oomshim.so ($BKS_OOMSHIM, faultshim.c built with BKS_SHIM_MALLOC):

Three writers pipeline BF.ADD / CF.ADD / BF.MADD on a few keys and a
reader pipelines BF.EXISTS / CF.EXISTS, each on its own connection, while
2% of the server's allocations fail for 3 s. Every request must be
answered (an error such as "ERR out of memory" or MISCONF is an answer; so
is the connection closed, which the client sees at once); none may wait:
a reply missing for CLIENT_TIMEOUT s is the hang of the issue. Once the
failures stop, every client gets answers again within RECOVER_S, writes are
accepted again, and every add that was answered (:1 / :0, an array of them)
is found by BF.MEXISTS / CF.MEXISTS, on the server and after a kill -9 and
a restart without the shim.

BKS_OOM_ROUNDS (default 3) rounds of it, each counted; BKS_OOM_PCT (default
2) the percentage; BKS_OOM_BUSY=n starts n busy loops to compete for the
CPUs (the issue's "busy machine"). On a hang the server's threads (gdb, if
installed; BKS_OOM_GDB=<file> adds commands), its sockets and CLIENT LIST
are printed. Skipped for sanitized servers ($BKS_SANITIZED): the shim
replaces malloc, theirs included.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis

from harness import Server, Runner, server_with_env

SHIM = os.environ.get("BKS_OOMSHIM")
ROUNDS = int(os.environ.get("BKS_OOM_ROUNDS", "3"))
BUSY = int(os.environ.get("BKS_OOM_BUSY", "0"))
PCT = int(os.environ.get("BKS_OOM_PCT", "2"))
FAULT_S = 3.0
CLIENT_TIMEOUT = 5.0
RECOVER_S = 10.0
PIPE = 16          # requests per pipelined batch (up to 8 times as many)


def shimmed(d, ctl):
    """A server with the allocation shim preloaded (for it alone)."""
    return server_with_env({"LD_PRELOAD": SHIM, "BKS_FAULT_CTL": ctl},
                           "--appendfsync", "everysec", dir=d)


class Client:
    """One connection sending pipelined batches until stopped. Answers are
    checked one by one: kept (writes: their items as acknowledged), errors
    counted; a closed connection is reopened; a timeout is a hang."""

    def __init__(self, srv, idx, reader=False):
        self.srv, self.idx, self.reader = srv, idx, reader
        self.bf_acked, self.cf_acked = [], []
        self.errors, self.closed, self.batches = {}, 0, 0
        self.last_ok = 0.0          # last batch answered with no error at all
        self.last_answer = 0.0      # last batch answered at all
        self.hang = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def batch(self, n):
        p, plan = [], []
        size = PIPE << (n % 4 if n % 3 else 0)   # 16, 32, 64, 128: buffers grow
        for k in range(size):
            item = "c%d-%d-%d" % (self.idx, n, k)
            key = k % 3
            if self.reader:
                if k % 2:
                    p.append(("BF.EXISTS", "bf:%d" % key, item))
                else:
                    p.append(("CF.EXISTS", "cf:%d" % key, item))
                plan.append(None)
            elif k % 8 == 7:
                items = [item + "m%d" % m for m in range(3)]
                p.append(("BF.MADD", "bf:m") + tuple(items))
                plan.append(("bf:m", items))
            elif k % 2:
                p.append(("CF.ADD", "cf:%d" % key, item))
                plan.append(("cf:%d" % key, [item]))
            else:
                p.append(("BF.ADD", "bf:%d" % key, item))
                plan.append(("bf:%d" % key, [item]))
        return p, plan

    def run(self):
        r = self.srv.client(socket_timeout=CLIENT_TIMEOUT)
        n = 0
        while not self.stop.is_set():
            cmds, plan = self.batch(n)
            n += 1
            if n % 50 == 0:          # a new connection now and then
                r.close()
                r = self.srv.client(socket_timeout=CLIENT_TIMEOUT)
            pipe = r.pipeline(transaction=False)
            for c in cmds:
                pipe.execute_command(*c)
            sent = time.time()
            try:
                got = pipe.execute(raise_on_error=False)
            except redis.exceptions.TimeoutError:
                self.hang = "no answer for %.0f s to a batch sent at %.2f" % (
                    time.time() - sent, sent)
                return
            except redis.exceptions.ConnectionError:
                self.closed += 1          # closed by the server: an answer
                r = self.srv.client(socket_timeout=CLIENT_TIMEOUT)
                time.sleep(0.01)
                continue
            self.batches += 1
            self.last_answer = time.time()
            clean = True
            for g, want in zip(got, plan):
                if isinstance(g, Exception):
                    clean = False
                    e = str(g).split(" ")[0] + " " + " ".join(str(g).split(" ")[1:4])
                    self.errors[e] = self.errors.get(e, 0) + 1
                    continue
                if want is None:
                    continue
                key, items = want
                acked = self.cf_acked if key.startswith("cf") else self.bf_acked
                vals = g if isinstance(g, list) else [g]
                for it, v in zip(items, vals):
                    if v in (0, 1):
                        acked.append((key, it))
            if clean:
                self.last_ok = time.time()


def missing(r, acked, cmd):
    by_key = {}
    for key, it in acked:
        by_key.setdefault(key, []).append(it)
    out = []
    for key, items in by_key.items():
        for i in range(0, len(items), 500):
            chunk = items[i:i + 500]
            got = r.execute_command(cmd, key, *chunk)
            out += [(key, it) for it, g in zip(chunk, got) if g != 1]
    return out


def one_round(rnd, d, ctl):
    srv = shimmed(d, ctl)
    clients = [Client(srv, 10 * rnd + i) for i in range(3)] + \
        [Client(srv, 10 * rnd + 3, reader=True)]
    try:
        for c in clients:
            c.thread.start()
        time.sleep(0.5)
        with open(ctl, "w") as f:
            f.write("malloc %d\n" % PCT)
        time.sleep(FAULT_S)
        os.unlink(ctl)
        cleared = time.time()
        # every client is answered again, writes accepted, within RECOVER_S
        deadline = cleared + RECOVER_S
        while time.time() < deadline:
            if srv.proc.poll() is not None:
                raise AssertionError("round %d: the server died (%d):\n%s"
                                     % (rnd, srv.proc.returncode, srv.log()[-3000:]))
            if any(c.hang for c in clients):
                break
            if all(c.last_ok > cleared + 0.2 for c in clients):
                break
            time.sleep(0.05)
        for c in clients:
            c.stop.set()
        for c in clients:
            c.thread.join(CLIENT_TIMEOUT + 5)
        hung = [(c.idx, c.hang) for c in clients if c.hang]
        if hung and shutil.which("gdb"):
            # where the server's threads are stuck
            extra = os.environ.get("BKS_OOM_GDB")
            bt = subprocess.run(["gdb", "-p", str(srv.proc.pid), "-batch", "-ex",
                                 "thread apply all bt"] + (["-x", extra] if extra else []),
                                capture_output=True, text=True)
            print(bt.stdout[-20000:])
            port = ":%d" % srv.port
            print(subprocess.run(["ss", "-tnp", "sport", "=", port, "or", "dport", "=", port],
                                 capture_output=True, text=True).stdout)
            try:
                print(srv.client(socket_timeout=3).execute_command("CLIENT", "LIST"))
            except Exception as e:
                print("CLIENT LIST:", e)
        assert not hung, "round %d: clients left without an answer: %s\nserver log:\n%s" % (
            rnd, hung, srv.log()[-3000:])
        late = [(c.idx, "%.1f s" % (c.last_ok - cleared if c.last_ok else -1))
                for c in clients if c.last_ok <= cleared + 0.2]
        assert not late, "round %d: not answered cleanly %.0f s after the failures " \
            "stopped: %s (errors %s)\nserver log:\n%s" % (
                rnd, RECOVER_S, late, [c.errors for c in clients], srv.log()[-3000:])
        bf = [a for c in clients for a in c.bf_acked]
        cf = [a for c in clients for a in c.cf_acked]
        r = srv.client()
        lost = missing(r, bf, "BF.MEXISTS") + missing(r, cf, "CF.MEXISTS")
        assert not lost, "round %d: %d acknowledged adds lost, e.g. %s" % (
            rnd, len(lost), lost[:3])
        srv.kill()
        s = Server(dir=d)
        r = s.client()
        lost = missing(r, bf, "BF.MEXISTS") + missing(r, cf, "CF.MEXISTS")
        assert not lost, "round %d, after a restart: %d acknowledged adds lost, e.g. %s" % (
            rnd, len(lost), lost[:3])
        s.close()
        errs = {}
        for c in clients:
            for k, v in c.errors.items():
                errs[k] = errs.get(k, 0) + v
        print("  round %d: %d+%d adds acknowledged, %d batches, %d reconnects, "
              "recovered in %.1f s; errors %s" % (
                  rnd, len(bf), len(cf), sum(c.batches for c in clients),
                  sum(c.closed for c in clients),
                  max(c.last_ok for c in clients) - cleared, errs))
    finally:
        for c in clients:
            c.stop.set()
        if os.path.exists(ctl):
            os.unlink(ctl)
        srv.close()


def test_new_descriptors():
    """Connections opened while allocations fail reach descriptors higher
    than any before. libuv keeps its watchers in a table indexed by
    descriptor, one per loop, and abort()s when it cannot grow it; the
    server grows the tables at start (net.c, presize_watchers), so a new
    high descriptor needs no allocation there. 40% of allocations fail
    while 1000 connections open and say PING (each may be refused or
    answered with an error); then the server must be alive and answer."""
    ctl = os.path.join(tempfile.gettempdir(), "bks-oomfd-%d" % os.getpid())
    d = tempfile.mkdtemp(prefix="bks-oomfd-")
    srv = shimmed(d, ctl)
    socks = []
    try:
        with open(ctl, "w") as f:
            f.write("malloc 40\n")
        time.sleep(0.1)   # the shim reads its control file every 20 ms
        for _ in range(1000):
            try:
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                socks.append(s)
            except OSError:
                pass
        time.sleep(0.5)
        os.unlink(ctl)
        time.sleep(0.1)
        assert srv.proc.poll() is None, "the server died (%d) as connections opened:\n%s" % (
            srv.proc.returncode, srv.log()[-3000:])
        assert srv.client(socket_timeout=5).ping() is True
    finally:
        for s in socks:
            s.close()
        if os.path.exists(ctl):
            os.unlink(ctl)
        srv.close()
        shutil.rmtree(d, ignore_errors=True)


def test_oom_rounds():
    ctl = os.path.join(tempfile.gettempdir(), "bks-oom-%d" % os.getpid())
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(BUSY)]
    try:
        failed = []
        for rnd in range(ROUNDS):
            d = tempfile.mkdtemp(prefix="bks-oom-")
            try:
                one_round(rnd, d, ctl)
            except AssertionError as e:
                failed.append(str(e))
                print("  round %d FAILED: %s" % (rnd, str(e)[-2500:]))
            finally:
                shutil.rmtree(d, ignore_errors=True)
        assert not failed, "%d of %d rounds failed; the first:\n%s" % (
            len(failed), ROUNDS, failed[0])
    finally:
        for b in busy:
            b.kill()
            b.wait()


def main():
    run = Runner("test_oom_faults")
    if os.environ.get("BKS_SANITIZED"):
        print("test_oom_faults: skipped for a sanitized server (the shim replaces malloc)")
        run.finish()
    if not SHIM or not os.path.exists(SHIM):
        print("test_oom_faults: $BKS_OOMSHIM (the LD_PRELOAD shim) is not built: failing")
        run.failed += 1
        run.finish()
    run.check("connections to new descriptors while 40% of allocations fail: no crash",
              test_new_descriptors)
    run.check("%d%% of allocations fail for %.0f s: every request answered, nothing "
              "acknowledged lost (%d rounds)" % (PCT, FAULT_S, ROUNDS), test_oom_rounds)
    run.finish()


if __name__ == "__main__":
    main()
