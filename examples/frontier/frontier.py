#!/usr/bin/python3
"""frontier.py - a crawler's de-duplicating URL frontier on bloomkit-server.

P producer processes push synthetic URLs (many duplicates, fixed seed) in
batches of BF.INSERT NOCREATE (BF.MADD's answers, but a missing key is an
error); a URL is admitted (enqueued for crawling) when it answers 1. Half-way through, bloomkit-server is killed with SIGKILL
and restarted on the same --dir: every URL acknowledged before the kill
must still be known (BF.MEXISTS = 1) before the producers go on. At the
end the admissions are compared with the exact set of URLs pushed.

Run through run.sh (it makes the scratch directory and picks the
binaries); --check makes the exit status say whether every check held.
"""
import argparse
import math
import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import time
from array import array

import redis

KEY = "frontier:seen"
HOT_SHARE = 0.3      # share of links that point at a small set of hot pages
WORDS = ["news", "shop", "blog", "wiki", "forum", "docs", "store", "media",
         "travel", "food", "tech", "cars", "music", "games", "sport", "health"]
TLDS = ["com", "org", "net", "io", "de", "co.uk", "fr", "info"]
SECTIONS = ["article", "product", "tag", "user", "category", "page", "post", "item"]


def url_of(i, n_hosts):
    """The URL of page id i: a fixed function, distinct ids give distinct URLs."""
    h = (i * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    host = i % n_hosts
    g = (host * 0xBF58476D1CE4E5B9) & 0xFFFFFFFF
    name = f"www.{WORDS[g & 15]}{WORDS[(g >> 4) & 15]}{host}.{TLDS[(g >> 8) & 7]}"
    path = f"/{SECTIONS[h & 7]}/{(h >> 8) & 0xFFFF:04x}/{WORDS[(h >> 3) & 15]}-{i}"
    if h >> 62 == 0:
        path += f"?page={(h >> 40) & 7}"       # a quarter carry a query string
    return "https://" + name + path


class Layout:
    """The synthetic crawl: ids in [0, universe); a share HOT_SHARE of the
    links go to `hot` popular pages, the rest uniformly anywhere."""
    def __init__(self, urls):
        self.universe = max(1000, urls)
        self.hot = max(100, urls // 1000)
        self.hosts = max(10, self.universe // 200)

    def expected_distinct(self, urls):
        cold = urls * (1 - HOT_SHARE)
        return self.hot + self.universe * (1 - math.exp(-cold / self.universe))


def producer(idx, a, shared):
    lay = Layout(a.urls)
    n = a.urls // a.producers + (1 if idx < a.urls % a.producers else 0)
    rng = random.Random(a.seed * 1000003 + idx)
    stride = lay.universe // lay.hot
    drawn = array("Q")       # every id acknowledged, in order
    admitted = array("Q")    # ids the add answered 1 for
    doubt = array("Q")       # ids of an unacknowledged batch answering 0 on retry
    acked_before_kill = None
    r = redis.Redis(port=a.port, socket_timeout=60)
    done = 0
    while done < n:
        b = min(a.batch, n - done)
        ids = [rng.randrange(lay.hot) * stride if rng.random() < HOT_SHARE
               else rng.randrange(lay.universe) for _ in range(b)]
        urls = [url_of(i, lay.hosts) for i in ids]
        in_doubt = False
        for _ in range(600):
            try:
                # BF.MADD's answers, but a lost key is an error instead of
                # a new default filter that knows nothing
                ans = r.execute_command("BF.INSERT", KEY, "NOCREATE", "ITEMS", *urls)
                break
            except redis.ResponseError as e:
                raise SystemExit(f"producer {idx}: {KEY}: {e}")
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                in_doubt = True     # sent, maybe applied, never acknowledged
                if not shared["resume"].is_set():
                    if acked_before_kill is None:
                        acked_before_kill = len(drawn)
                        save(f"{a.scratch}/acked-{idx}.bin", drawn)
                        shared["queue"].put(("stalled", idx))
                    if not shared["resume"].wait(600):
                        raise SystemExit(f"producer {idx}: no restart came")
                else:
                    time.sleep(0.1)
                r = redis.Redis(port=a.port, socket_timeout=60)
        else:
            raise SystemExit(f"producer {idx}: server unreachable")
        for i, x in zip(ids, ans):
            if x == 1:
                admitted.append(i)
            elif in_doubt:
                # 0 may be our own add whose reply the kill took: admit it
                # (at least once; the crawler's fetcher tolerates a repeat)
                doubt.append(i)
        drawn.extend(ids)
        done += b
        with shared["progress"].get_lock():
            shared["progress"].value += b
    if acked_before_kill is None:
        save(f"{a.scratch}/acked-{idx}.bin", drawn)
    for name, arr in (("drawn", drawn), ("admitted", admitted), ("doubt", doubt)):
        save(f"{a.scratch}/{name}-{idx}.bin", arr)
    shared["queue"].put(("done", idx))


def save(path, arr):
    with open(path, "wb") as f:
        arr.tofile(f)


def load(path):
    arr = array("Q")
    with open(path, "rb") as f:
        arr.frombytes(f.read())
    return arr


class Server:
    def __init__(self, a):
        self.a = a
        self.proc = None

    def start(self):
        a = self.a
        log = open(os.path.join(a.scratch, "server.log"), "ab")
        self.proc = subprocess.Popen(
            [a.server, "--port", str(a.port), "--dir", os.path.join(a.scratch, "data"),
             "--appendfsync", a.appendfsync, "--appendonly", a.appendonly], stdout=log, stderr=subprocess.STDOUT)
        with open(os.path.join(a.scratch, "server.pid"), "w") as f:
            f.write(str(self.proc.pid))
        t0 = time.time()
        while time.time() - t0 < 60:
            if self.proc.poll() is not None:
                raise SystemExit("bloomkit-server exited; see server.log")
            try:
                if redis.Redis(port=a.port, socket_timeout=1).ping():
                    return time.time() - t0
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                time.sleep(0.02)
        raise SystemExit("bloomkit-server did not answer PING")

    def kill(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def cpu(self):
        """Seconds of CPU (user + system) the server has used so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0


def bloom_rate(n, m, k):
    return (1 - math.exp(-k * n / m)) ** k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--urls", type=lambda s: int(float(s)), default=1000000)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--error", type=float, default=0.001)
    ap.add_argument("--capacity", type=lambda s: int(float(s)), default=0,
                    help="0: derive from the expected distinct URLs plus 10%%")
    ap.add_argument("--kill-at", type=float, default=0.5,
                    help="kill -9 the server after this share of the URLs (0: never)")
    ap.add_argument("--appendfsync", default="always")
    ap.add_argument("--appendonly", default="yes",
                    help="no: snapshots only, to see the check catch what a kill loses")
    ap.add_argument("--probes", type=lambda s: int(float(s)), default=0,
                    help="absent URLs probed for the rate at the end (0: = --urls/10, at least 100000)")
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()

    lay = Layout(a.urls)
    expected = lay.expected_distinct(a.urls)
    capacity = a.capacity or int(expected * 1.1)
    srv = Server(a)
    srv.start()
    r = redis.Redis(port=a.port)
    r.execute_command("BF.RESERVE", KEY, a.error, capacity)

    shared = {"progress": mp.Value("q", 0), "resume": mp.Event(), "queue": mp.Queue()}
    t0 = time.time()
    procs = [mp.Process(target=producer, args=(i, a, shared), daemon=True)
             for i in range(a.producers)]
    for p in procs:
        p.start()
    failures = []
    kill = {}
    if a.kill_at > 0:
        while shared["progress"].value < a.kill_at * a.urls and any(p.is_alive() for p in procs):
            if srv.proc.poll() is not None:
                raise SystemExit("bloomkit-server died before the kill; see server.log")
            time.sleep(0.01)
        kill["at"] = shared["progress"].value
        kill["rss"] = srv.rss()
        kill["cpu"] = srv.cpu()
        t_kill = time.time()
        srv.kill()
        reported = set()
        while len(reported) < a.producers:       # each is stalled or finished
            reported.add(shared["queue"].get(timeout=120)[1])
        kill["restart_s"] = srv.start()
        acked = array("Q")
        for i in range(a.producers):
            acked.extend(load(f"{a.scratch}/acked-{i}.bin"))
        t_ver = time.time()
        missing = 0
        pipe = r.pipeline(transaction=False)
        for s in range(0, len(acked), 1000):
            pipe.execute_command("BF.MEXISTS", KEY, *[url_of(i, lay.hosts) for i in acked[s:s + 1000]])
            if s % 20000 == 19000 or s + 1000 >= len(acked):
                for res in pipe.execute():
                    missing += res.count(0)
        kill["acked"] = len(acked)
        kill["missing"] = missing
        kill["verify_s"] = time.time() - t_ver
        kill["down_s"] = time.time() - t_kill
        if missing:
            failures.append(f"{missing} URLs acknowledged before the kill are unknown after it")
        shared["resume"].set()
    else:
        shared["resume"].set()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            failures.append(f"producer exited with {p.exitcode}")
    elapsed = time.time() - t0
    if failures and any("producer" in f for f in failures):
        print("\n".join("FAIL: " + f for f in failures))
        return 1

    # exact accounting over the id space: counts per id (capped at 255)
    seen = bytearray(lay.universe)
    adm = bytearray(lay.universe)
    doubt_n = 0
    for i in range(a.producers):
        for x in load(f"{a.scratch}/drawn-{i}.bin"):
            seen[x] = 1
        for x in load(f"{a.scratch}/admitted-{i}.bin"):
            if adm[x] < 255:
                adm[x] += 1
        for x in load(f"{a.scratch}/doubt-{i}.bin"):
            doubt_n += 1
            if adm[x] < 255:
                adm[x] += 1
    pushed = a.urls
    distinct = lay.universe - seen.count(0)
    admitted_unique = lay.universe - adm.count(0)
    admissions = sum(adm)
    losses = sum(1 for s, n in zip(seen, adm) if s and not n)
    extra = admissions - admitted_unique     # admitted more than once

    info = dict(zip(*[iter(r.execute_command("BF.INFO", KEY))] * 2))
    size = info[b"Size"]
    stages = info[b"Number of filters"]
    card = r.execute_command("BF.CARD", KEY)
    dbg = r.execute_command("BF.DEBUG", KEY)[1].decode().split()
    fields = dict(f.split(":") for f in dbg)
    m, k = int(fields["bits"]), int(fields["hashes"])
    mem = r.info("memory")
    rss = srv.rss()
    cpu = srv.cpu() + kill.get("cpu", 0)

    # rate now, against URLs never pushed (ids past the universe)
    probes = a.probes or max(100000, a.urls // 10)
    fp = 0
    t_p = time.time()
    pipe = r.pipeline(transaction=False)
    for s in range(0, probes, 1000):
        pipe.execute_command("BF.MEXISTS", KEY, *[url_of(lay.universe + j, lay.hosts)
                                                  for j in range(s, min(s + 1000, probes))])
    for res in pipe.execute():
        fp += sum(res)
    probe_s = time.time() - t_p

    # expected losses: each new URL meets the rate of the filter as it then
    # is, (1 - e^(-k j / m))^k with j items in; summed over the admissions
    steps = 2000
    exp_loss = var_loss = 0.0
    for t in range(steps):
        p = bloom_rate((t + 0.5) / steps * card, m, k) if stages == 1 else a.error
        exp_loss += p * distinct / steps
        var_loss += p * (1 - p) * distinct / steps
    tol_loss = 4 * math.sqrt(var_loss) + 1
    cfg_bound = distinct * a.error + 4 * math.sqrt(distinct * a.error) + 1
    p_now = bloom_rate(card, m, k) if stages == 1 else a.error
    tol_fp = 4 * math.sqrt(probes * p_now) + 1

    bits_per_key = m / capacity
    rows = [
        ("URLs pushed", f"{pushed:,}", f"{a.producers} producers, BF.INSERT NOCREATE batches of {a.batch}"),
        ("distinct URLs (exact)", f"{distinct:,}", f"expected {expected:,.0f}"),
        ("admitted (enqueued)", f"{admissions:,}", f"{admitted_unique:,} distinct URLs"),
        ("duplicates caught", f"{pushed - distinct:,}", "answered 0, were seen"),
        ("false-positive losses", f"{losses:,}",
         f"{losses / max(distinct, 1):.5%} of distinct; expected {exp_loss:,.1f} +- {tol_loss:,.1f}"),
        ("admitted twice (in doubt)", f"{extra:,}", f"{doubt_n:,} URLs of unacknowledged batches admitted on retry"),
        ("BF.RESERVE", f"{a.error} {capacity:,}", f"stage 0: {m:,} bits, {k} hashes, {bits_per_key:.2f} bits/key"),
        ("BF.INFO Size", f"{size:,} B", f"{size / max(card, 1):.2f} B per admitted URL; {stages} stage(s)"),
        ("BF.CARD", f"{card:,}", ""),
        ("INFO used_memory", f"{int(mem['used_memory']):,} B", ""),
        ("server RSS", f"{rss:,} B", f"before the kill {kill.get('rss', 0):,} B"),
        ("rate now (absent URLs)", f"{fp / probes:.5%}",
         f"{fp:,} of {probes:,}; formula {p_now:.5%}; configured {a.error:.4%}"),
        ("throughput", f"{pushed / elapsed:,.0f} URLs/s",
         f"{elapsed:.1f} s wall, the restart included"),
        ("server CPU", f"{cpu:.1f} s", f"{cpu / pushed * 1e6:.2f} s per million URLs pushed, "
                                       "the verification and probes included"),
        ("lookups (BF.MEXISTS)", f"{probes / probe_s:,.0f} /s", "one client, pipelined"),
    ]
    if kill:
        rows += [
            ("kill -9 after", f"{kill['at']:,} URLs", f"appendfsync {a.appendfsync}"),
            ("restart to PING", f"{kill['restart_s']:.2f} s", f"producers paused {kill['down_s']:.1f} s"),
            ("acked before kill, lost", f"{kill['missing']:,} of {kill['acked']:,}",
             f"BF.MEXISTS after restart, {kill['verify_s']:.1f} s"),
        ]
        rows.append(("throughput w/o pause", f"{pushed / (elapsed - kill['down_s']):,.0f} URLs/s", ""))
    w0 = max(len(x[0]) for x in rows)
    w1 = max(len(x[1]) for x in rows)
    for name, val, note in rows:
        print(f"{name:<{w0}}  {val:>{w1}}  {note}")

    if admissions != distinct - losses + extra:
        failures.append(f"admitted {admissions} != distinct {distinct} - losses {losses}"
                        f" + admitted twice {extra}")
    if extra > (doubt_n if kill else 0):
        failures.append(f"{extra} URLs admitted twice ({doubt_n} in doubt after the kill)")
    if losses > cfg_bound:
        failures.append(f"losses {losses} above the configured rate's bound {cfg_bound:.1f}")
    if abs(losses - exp_loss) > tol_loss:
        failures.append(f"losses {losses} outside {exp_loss:.1f} +- {tol_loss:.1f}")
    if abs(fp - probes * p_now) > tol_fp:
        failures.append(f"absent-URL positives {fp} outside {probes * p_now:.1f} +- {tol_fp:.1f}")
    if not admissions - doubt_n <= card <= admissions:
        # the server counts the adds it answered 1, the lost replies included
        failures.append(f"BF.CARD {card} outside [{admissions - doubt_n}, {admissions}]")
    if a.kill_at > 0 and not kill:
        failures.append("the kill did not happen")
    for f in failures:
        print("FAIL: " + f)
    if a.check:
        print("checks: " + ("FAILED" if failures else "all passed"))
        return 1 if failures else 0
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
