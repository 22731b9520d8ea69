#!/usr/bin/python3
"""blocklist.py - a static blocklist on bloomkit-server, swapped while in use.

Version 1 of a list of hostnames is built into a static filter by the CLI
(`bloomkit create --type static`) and pushed into the key `blocklist`
(`bloomkit push`). Checking clients then ask SF.MEXISTS without pause
while version 2 (some hosts removed, some added) is pushed into
`blocklist:next` and renamed over `blocklist` (RENAME replaces the key in
one step). Every client request is checked: keys listed in both versions
must answer 1 on every request, and no request may fail.

Run through run.sh (scratch directory, binaries); --check makes the exit
status say whether every check held.
"""
import argparse
import json
import math
import multiprocessing as mp
import random
import subprocess
import sys
import time

import redis

KEY = "blocklist"
NEXT = "blocklist:next"
WORDS = ["login", "secure", "account", "verify", "update", "bank", "pay", "mail",
         "cdn", "track", "ads", "promo", "free", "win", "crypto", "wallet"]
TLDS = ["com", "net", "xyz", "top", "info", "ru", "cn", "io"]


def host_of(i):
    """Hostname number i: a fixed function, distinct numbers give distinct names."""
    h = (i * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    return f"{WORDS[h & 15]}-{WORDS[(h >> 4) & 15]}{(h >> 8) & 0xFFFFFF:06x}-{i}.{TLDS[(h >> 32) & 7]}"


def checker(idx, a, stable, shared):
    """Ask SF.MEXISTS for batches of keys listed in both versions until told
    to stop; count requests, keys, errors and 0 answers (false negatives),
    separately for the requests that overlapped the swap. Started before
    the lists are made (a small process), it draws its own pool of hosts
    from the ids in `stable`."""
    rng = random.Random(a.seed * 7 + idx)
    pool = [host_of(i) for i in rng.sample(stable, min(len(stable), 50000))]
    shared["go"].wait()
    r = redis.Redis(port=a.port, socket_timeout=10)
    c = dict(req=0, keys=0, err=0, fn=0, swap_req=0, swap_keys=0, swap_err=0, swap_fn=0,
             max_ms=0.0, swap_max_ms=0.0, t0=time.time())
    start, end = shared["swap_start"], shared["swap_end"]
    while not shared["stop"].is_set():
        batch = rng.sample(pool, a.batch)
        t = time.time()
        try:
            ans = r.execute_command("SF.MEXISTS", KEY, *batch)
            err, fn = 0, len(batch) - sum(ans)
        except redis.RedisError as e:
            err, fn = 1, 0
            if c["err"] < 3:
                print(f"checker {idx}: {e}", file=sys.stderr)
        t1 = time.time()
        ms = (t1 - t) * 1000
        c["req"] += 1
        c["keys"] += len(batch)
        c["err"] += err
        c["fn"] += fn
        c["max_ms"] = max(c["max_ms"], ms)
        # a request overlapping [swap_start, swap_end] counts for the swap
        if start.value and t1 >= start.value and (end.value == 0 or t <= end.value):
            c["swap_req"] += 1
            c["swap_keys"] += len(batch)
            c["swap_err"] += err
            c["swap_fn"] += fn
            c["swap_max_ms"] = max(c["swap_max_ms"], ms)
    c["t1"] = time.time()
    shared["queue"].put(c)


def write_keys(path, ids):
    with open(path, "w") as f:
        f.write("\n".join(host_of(i) for i in ids))
        f.write("\n")


def mexists(r, keys):
    """How many of keys the key answers 1 for (pipelined SF.MEXISTS)."""
    pos = 0
    pipe = r.pipeline(transaction=False)
    for s in range(0, len(keys), 1000):
        pipe.execute_command("SF.MEXISTS", KEY, *keys[s:s + 1000])
        if s % 50000 == 49000 or s + 1000 >= len(keys):
            for res in pipe.execute():
                pos += sum(res)
    return pos


def run(cmd):
    t = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.time() - t


def main():
    ap = argparse.ArgumentParser()
    num = lambda s: int(float(s))
    ap.add_argument("--server", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--keys", type=num, default=1000000, help="hosts in version 1")
    ap.add_argument("--change", type=float, default=0.1,
                    help="share of version 1 removed, and as many added, in version 2")
    ap.add_argument("--error", default="", help="bloomkit create --error (default: 8-bit, 2^-8)")
    ap.add_argument("--probes", type=num, default=0, help="absent hosts probed (0: = --keys)")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--batch", type=int, default=100, help="keys per client SF.MEXISTS")
    ap.add_argument("--chunk-size", default="4194304", help="bloomkit push --chunk-size")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds of checks before and after the swap")
    ap.add_argument("--direct-swap", action="store_true",
                    help="push --replace straight into the live key (bloomkit push stages it)")
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()

    n = a.keys
    ch = int(n * a.change)
    v1 = range(0, n)
    removed, stable, added = range(0, ch), range(ch, n), range(n, n + ch)
    absent = range(4 * n, 4 * n + (a.probes or n))
    shared = {"go": mp.Event(), "stop": mp.Event(), "queue": mp.Queue(),
              "swap_start": mp.Value("d", 0.0), "swap_end": mp.Value("d", 0.0)}
    procs = [mp.Process(target=checker, args=(i, a, stable, shared), daemon=True)
             for i in range(a.clients)]
    for p in procs:
        p.start()
    d = a.scratch
    write_keys(f"{d}/v1.txt", v1)
    write_keys(f"{d}/v2.txt", list(stable) + list(added))
    write_keys(f"{d}/absent.txt", absent)
    err = ["--error", a.error] if a.error else []
    build1 = run([a.cli, "create", "--type", "static", f"{d}/v1.bkf", f"{d}/v1.txt"] + err)
    build2 = run([a.cli, "create", "--type", "static", f"{d}/v2.bkf", f"{d}/v2.txt"] + err)
    info = json.loads(subprocess.run([a.cli, "info", "--json", f"{d}/v2.bkf"], check=True,
                                     capture_output=True, text=True).stdout)

    log = open(f"{d}/server.log", "ab")
    srv = subprocess.Popen([a.server, "--port", str(a.port), "--dir", f"{d}/data"],
                           stdout=log, stderr=subprocess.STDOUT)
    with open(f"{d}/server.pid", "w") as f:
        f.write(str(srv.pid))
    r = redis.Redis(port=a.port, socket_timeout=30)
    for _ in range(600):
        try:
            r.ping()
            break
        except (redis.ConnectionError, OSError):
            time.sleep(0.05)
    addr = f"127.0.0.1:{a.port}"
    push1 = run([a.cli, "push", f"{d}/v1.bkf", addr, KEY])
    failures = []

    v1_keys = [host_of(i) for i in v1]
    before = mexists(r, v1_keys)
    if before != n:
        failures.append(f"before the swap {n - before} of {n} listed hosts answer 0")

    del v1_keys
    shared["go"].set()
    time.sleep(a.settle)
    shared["swap_start"].value = time.time()
    if a.direct_swap:
        subprocess.run([a.cli, "push", "-q", "--replace", "--chunk-size", a.chunk_size,
                        f"{d}/v2.bkf", addr, KEY], check=True)
    else:
        subprocess.run([a.cli, "push", "-q", "--replace", "--chunk-size", a.chunk_size,
                        f"{d}/v2.bkf", addr, NEXT], check=True)
        r.rename(NEXT, KEY)
    shared["swap_end"].value = time.time()
    swap_s = shared["swap_end"].value - shared["swap_start"].value
    time.sleep(a.settle)
    shared["stop"].set()
    stats = [shared["queue"].get(timeout=60) for _ in procs]
    for p in procs:
        p.join()

    v2_keys = [host_of(i) for i in stable] + [host_of(i) for i in added]
    after = mexists(r, v2_keys)
    old_pos = mexists(r, [host_of(i) for i in removed])
    absent_keys = [host_of(i) for i in absent]
    t = time.time()
    fp = mexists(r, absent_keys)
    lookup_rate = len(absent_keys) / (time.time() - t)
    cli_fp = int(subprocess.run([a.cli, "check", "-c", f"{d}/v2.bkf", f"{d}/absent.txt"],
                                capture_output=True, text=True).stdout)
    sf = r.execute_command("SF.INFO", KEY)
    sf = {sf[i].decode(): sf[i + 1] for i in range(0, len(sf), 2)}
    rate = float(sf["Error rate"])
    mem = r.info("memory")
    srv.kill()
    srv.wait()

    tot = {k: sum(s[k] for s in stats) for k in stats[0] if k not in ("t0", "t1", "max_ms", "swap_max_ms")}
    secs = max(s["t1"] for s in stats) - min(s["t0"] for s in stats)
    m = len(absent_keys)
    tol = lambda cnt: 4 * math.sqrt(cnt * rate * (1 - rate)) + 1
    rows = [
        ("hosts v1 / v2", f"{n:,} / {len(v2_keys):,}", f"{ch:,} removed, {ch:,} added, {len(stable):,} in both"),
        ("build (create --type static)", f"{build2:.2f} s", f"v1 {build1:.2f} s"),
        ("filter", f"{info['bytes']:,} B", f"{info['bytes'] * 8 / len(v2_keys):.2f} bits/host, "
                                            f"file {info['file_bytes']:,} B"),
        ("SF.INFO", f"{sf['Size']:,} B", f"{sf['Type'].decode()}, {float(sf['Bits per item']):.2f} bits/item, "
                                          f"{sf['Number of items']:,} items, rate {rate:.5%}"),
        ("push v1", f"{push1:.2f} s", ""),
        ("swap (push + RENAME)" if not a.direct_swap else "swap (push --replace live)",
         f"{swap_s * 1000:.0f} ms", f"--chunk-size {a.chunk_size}"),
        ("client requests", f"{tot['req']:,}", f"{a.clients} clients, SF.MEXISTS of {a.batch}; "
                                                 f"{tot['swap_req']:,} overlapped the swap"),
        ("checks per second", f"{tot['keys'] / secs:,.0f}", f"{tot['req'] / secs:,.0f} requests/s"),
        ("errors seen", f"{tot['err']:,}", f"{tot['swap_err']:,} during the swap"),
        ("false negatives seen", f"{tot['fn']:,}", f"{tot['swap_fn']:,} during the swap "
                                                   f"(of {tot['swap_keys']:,} checks)"),
        ("slowest request", f"{max(s['max_ms'] for s in stats):.1f} ms",
         f"during the swap {max(s['swap_max_ms'] for s in stats):.1f} ms"),
        ("v1 present before", f"{before:,} of {n:,}", ""),
        ("v2 present after", f"{after:,} of {len(v2_keys):,}", ""),
        ("removed, still positive", f"{old_pos:,} of {ch:,}", f"{old_pos / max(ch, 1):.3%}; expected {ch * rate:.1f}"),
        ("false-positive rate", f"{fp / m:.4%}", f"{fp:,} of {m:,} absent hosts; configured {rate:.4%} "
                                                 f"(expected {m * rate:.0f} +- {tol(m):.0f})"),
        ("bloomkit check -c (CLI)", f"{cli_fp:,}", "same file, same absent hosts"),
        ("lookups, one client", f"{lookup_rate:,.0f} /s", "SF.MEXISTS of 1000, pipelined"),
        ("INFO used_memory", f"{mem['used_memory']:,} B", f"RSS {mem['used_memory_rss']:,} B"),
    ]
    w0 = max(len(x[0]) for x in rows)
    w1 = max(len(x[1]) for x in rows)
    for name, val, note in rows:
        print(f"{name:<{w0}}  {val:>{w1}}  {note}")

    if tot["err"]:
        failures.append(f"checking clients saw {tot['err']} errors")
    if tot["fn"]:
        failures.append(f"checking clients saw {tot['fn']} false negatives (a listed host answered 0)")
    if tot["swap_req"] == 0:
        failures.append("no client request overlapped the swap")
    if after != len(v2_keys):
        failures.append(f"after the swap {len(v2_keys) - after} hosts of version 2 answer 0")
    if old_pos > ch * rate + tol(ch):
        failures.append(f"{old_pos} removed hosts still answer 1 (expected {ch * rate:.1f} + {tol(ch):.1f})")
    if abs(fp - m * rate) > tol(m):
        failures.append(f"false positives {fp} of {m}: outside {m * rate:.1f} +- {tol(m):.1f}")
    if cli_fp != fp:
        failures.append(f"the server found {fp} absent hosts positive, the CLI {cli_fp}")
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
