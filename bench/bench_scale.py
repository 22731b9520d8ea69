#!/usr/bin/python3
"""bench_scale.py - one filter of N keys (default 1e9) through
bloomkit-server, end to end: fill rate, memory, snapshot, restart, first
answer, the measured false-positive rate, and the copy of the key to a
Redis with bloomkit.so (`bloomkit copy`, which moves a big key by
SCANDUMP/LOADCHUNK chunks).

Usage: bench/bench_scale.py
  env: N          keys (default 1000000000)
       ERROR      the filter's rate (default 0.01)
       FILL       madd (BF.MADD of 100 keys per command, default) or add
                  (one BF.ADD per command), both pipelined 64 deep by
                  redis-benchmark from 20 connections
       COPY       0 skips the copy to Redis (default 1)
       BLOOMKIT_SERVER, BLOOMKIT_CLI, BLOOMKIT_MODULE: the programs
       (default: build/release's)
       SERVER_FLAGS  extra bloomkit-server flags, space-separated (for
                  example "--auto-aof-rewrite-percentage 0": see below)
       BENCH_DIR  where the data directories go (default /tmp; needs
                  about 2.5x the filter's size free: the snapshot, the
                  log between compactions, and the copy's Redis)

The keys are redis-benchmark's __rand_int__ over 2^31 - 1 values (its
largest -r), so N adds hold about M (1 - e^(-N/M)) distinct keys, M = 2^31:
0.80e9 at N = 1e9; BF.INFO's items counts the adds that were new. Absent keys for the rate are of another
shape ("absent-<i>"), so none of them was added. Run it alone on the
machine: it fills two cores.

On the 2-core VMs of this project an automatic compaction during the fill
collapses the add rate of a filter this big for minutes (measured: from
1.4-2.8M to 50-150k items/s): after the fork, every page the two worker
threads write faults, and faults taken by two threads of one process cost
far more there (bench/RESULTS.md, bench_scale). SERVER_FLAGS="--auto-aof-
rewrite-percentage 0" measures the fill without compactions; the SAVE
row then writes the whole filter once.
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import harness  # noqa: E402

N = int(float(os.environ.get("N", "1e9")))
ERROR = os.environ.get("ERROR", "0.01")
FILL = os.environ.get("FILL", "madd")
COPY = os.environ.get("COPY", "1") != "0"
CLI = os.environ.get("BLOOMKIT_CLI") or os.path.join(ROOT, "build", "release", "cli",
                                                     "bloomkit")
MODULE = os.environ.get("BLOOMKIT_MODULE") or os.path.join(ROOT, "build", "release",
                                                           "module", "bloomkit.so")
BASE = os.environ.get("BENCH_DIR", "/tmp")
ABSENT = 200000
PROBES = 20000
rows = []


def row(what, value):
    rows.append((what, value))
    print("  %-44s %s" % (what, value), flush=True)


def rss_mib(pid):
    return harness.rss_bytes(pid) / 1048576.0


def used_mib(r):
    return r.info("memory")["used_memory"] / 1048576.0


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def fill(port):
    """redis-benchmark's own rate; returns (seconds, items/s)."""
    if FILL == "add":
        cmd, per = ["BF.ADD", "big", "__rand_int__"], 1
    else:
        cmd, per = ["BF.MADD", "big"] + ["__rand_int__"] * 100, 100
    args = ["redis-benchmark", "-p", str(port), "-c", "20", "-P", "64", "--threads", "2",
            "-r", "2147483647", "-n", str(max(1, N // per)), "--csv"] + cmd
    secs, out = timed(lambda: subprocess.run(args, stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL, check=True))
    return secs, (N // per) * per / secs


def rate(r):
    """Measured rate on ABSENT keys never added."""
    hits = 0
    for start in range(0, ABSENT, 1000):
        keys = ["absent-%d" % i for i in range(start, start + 1000)]
        hits += sum(r.execute_command("BF.MEXISTS", "big", *keys))
    return hits / ABSENT


def probes(r):
    keys = ["probe-%d" % i for i in range(PROBES)] + ["%012d" % i for i in range(PROBES)]
    return [int(x) for x in r.execute_command("BF.MEXISTS", "big", *keys)]


def first_answer(srv):
    """Start srv's process again; seconds to PONG and to a first answer."""
    t0 = time.perf_counter()
    srv.start(wait=False)
    while True:
        try:
            c = srv.client(socket_timeout=120)
            if c.ping():
                break
        except (harness.redis.exceptions.ConnectionError, OSError):
            time.sleep(0.002)
    t_pong = time.perf_counter() - t0
    c.execute_command("BF.EXISTS", "big", "absent-0")
    return t_pong, time.perf_counter() - t0, c


def settled(r):
    """Wait for a compaction the fill started to end (SAVE would wait
    for it too, and its time is not SAVE's)."""
    while r.info("persistence").get("rdb_bgsave_in_progress"):
        time.sleep(0.1)


def main():
    os.makedirs(BASE, exist_ok=True)
    tempfile.tempdir = BASE   # harness puts its data directories there
    harness.MODULE = None
    extra = os.environ.get("SERVER_FLAGS", "").split()
    srv = harness.Server("--loglevel", "warning", *extra)
    print("bench_scale.py: N=%d error=%s fill=%s server=%s flags=%s" % (
        N, ERROR, FILL, harness.SERVER, " ".join(extra) or "-"))
    r = srv.client(socket_timeout=600)
    r.execute_command("BF.RESERVE", "big", ERROR, str(N), "NONSCALING")
    size = r.execute_command("BF.INFO", "big", "SIZE")[0]
    row("filter bytes (BF.INFO SIZE)", "%d (%.2f GiB)" % (size, size / 2**30))
    secs, items_s = fill(srv.port)
    row("fill: %s, items/s" % FILL, "%.0f (%.0f s)" % (items_s, secs))
    items = r.execute_command("BF.INFO", "big", "ITEMS")[0]
    row("items (distinct keys added)", "%d" % items)
    row("used_memory / RSS after the fill, MiB", "%.0f / %.0f" % (used_mib(r), rss_mib(srv.proc.pid)))
    measured = rate(r)
    row("measured rate on %d absent keys" % ABSENT, "%.4f%% (asked %s%%)" % (measured * 100, float(ERROR) * 100))
    before = probes(r)
    settled(r)
    t, _ = timed(lambda: r.execute_command("SAVE"))
    row("SAVE after the fill, s", "%.2f" % t)
    t, _ = timed(lambda: r.execute_command("SAVE"))
    row("SAVE again, nothing changed, ms", "%.1f" % (t * 1000))
    t, code = timed(lambda: srv.stop())
    row("SHUTDOWN, nothing changed, ms", "%.1f (exit %d)" % (t * 1000, code))
    t_pong, t_first, r = first_answer(srv)
    row("restart: PONG / first answer, s", "%.3f / %.3f" % (t_pong, t_first))
    row("RSS after the restart and one answer, MiB", "%.0f" % rss_mib(srv.proc.pid))
    same = probes(r) == before
    row("answers after the restart identical", "yes" if same else "NO")
    if COPY:
        harness.MODULE = MODULE
        dst = harness.Server()
        harness.MODULE = None
        t, p = timed(lambda: subprocess.run(
            [CLI, "copy", "127.0.0.1:%d" % srv.port, "127.0.0.1:%d" % dst.port, "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        row("bloomkit copy to Redis+bloomkit.so, s", "%.1f (exit %d)" % (t, p.returncode))
        if p.returncode != 0:
            print(p.stderr.decode(errors="replace"), file=sys.stderr)
        rd = dst.client(socket_timeout=600)
        copied = probes(rd) == before
        row("answers in Redis identical", "yes" if copied else "NO")
        row("Redis used_memory / RSS after the copy, MiB", "%.0f / %.0f" % (used_mib(rd), rss_mib(dst.proc.pid)))
        dst.close()
    else:
        copied = True
    srv.close()
    print()
    print("| %s | %s |" % ("N = %d, error %s" % (N, ERROR), "measured"))
    print("|---|---|")
    for what, value in rows:
        print("| %s | %s |" % (what, value))
    return 0 if same and copied else 1


if __name__ == "__main__":
    sys.exit(main())
