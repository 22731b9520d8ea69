#!/usr/bin/python3
"""`bloomkit copy` of a big filter (issue 32): by chunks, and errors named.

- A BF key of about 1 GB (64 MB when $BKS_SANITIZED is set) and a few small
  keys of every kind with SCANDUMP in one bloomkit-server, copied with
  `bloomkit copy` to a second bloomkit-server and to Debian's redis-server
  with bloomkit.so: the big key moves by chunks (one DUMP of it would pass
  client-output-buffer-limit), the small ones by DUMP/RESTORE; every key
  answers as on SRC, the big one has the same BF.INFO and the same
  SCANDUMP bytes (a SHA-256 over every chunk), TTLs are kept.
- SRC is restarted first, so the big key is used in place from its snapshot
  file (map-threshold): MEMORY USAGE must still count it, which is what
  copy sizes keys by.
- --chunk-threshold 0: the small keys of every kind by chunks too.
- Errors name the key and the side: a DST whose maxmemory is too small for
  the big key (LOADCHUNK refused: "big: DST host:port"), the other keys
  copied all the same, exit 2; a SRC that closes the connection on a DUMP
  too large for its client-output-buffer-limit names the key, "SRC" and
  the node, and the copy goes on with the next keys.

$BLOOMKIT_SERVER and $BLOOMKIT_CLI name the build's programs (CTest sets
them); the module is $BLOOMKIT_MODULE, else the build's module/bloomkit.so
beside server/. Every process is killed at the end.
"""
import hashlib
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402
from harness import Runner, Server  # noqa: E402

CLI = os.environ.get("BLOOMKIT_CLI") or os.path.join(harness.ROOT, "build", "release",
                                                      "cli", "bloomkit")
MODULE = harness.MODULE or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(harness.SERVER))), "module",
    "bloomkit.so")
harness.MODULE = None   # Server() is bloomkit-server unless redis_server() says
SANITIZED = os.environ.get("BKS_SANITIZED") is not None

# BF.RESERVE big 0.01 CAPACITY: bloomkit's BF takes about 11.5 bits per
# item at 1% (BF.INFO Size), so 1 GiB at about 747 million items (the
# sanitizers: 64 MiB)
BIG_BYTES = (64 if SANITIZED else 1024) << 20
CAPACITY = BIG_BYTES * 8 * 10 // 115
ITEMS = ["big:%d" % i for i in range(20000)]
ABSENT = ["nope:%d" % i for i in range(20000)]


def sanitizer_runtime():
    """LD_PRELOAD for redis-server when the module has a sanitizer runtime
    to find (a sanitized build), else None."""
    nm = subprocess.run(["nm", "-D", "--undefined-only", MODULE], capture_output=True,
                        text=True)
    for sym, lib in (("__asan_", "libasan.so"), ("__tsan_", "libtsan.so")):
        if sym in nm.stdout:
            cc = os.environ.get("CC") or "cc"
            return subprocess.run([cc, "-print-file-name=" + lib], capture_output=True,
                                  text=True).stdout.strip()
    return None


def redis_server(*flags):
    """Debian's redis-server with bloomkit.so."""
    assert os.path.isfile(MODULE), "the module %s (build it)" % MODULE
    saved = dict(os.environ)
    harness.MODULE = MODULE
    rt = sanitizer_runtime()
    if rt:
        os.environ["LD_PRELOAD"] = rt
        os.environ["ASAN_OPTIONS"] = "detect_leaks=0:allocator_may_return_null=1"
    try:
        return Server(*flags)
    finally:
        harness.MODULE = None
        os.environ.clear()
        os.environ.update(saved)


def cli_env():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=1"
    return env


def copy(src, dst, *args):
    """bloomkit copy 127.0.0.1:SRC 127.0.0.1:DST args: (exit code, stdout,
    stderr, seconds)."""
    t0 = time.time()
    p = subprocess.run([CLI, "copy", "127.0.0.1:%d" % src.port, "127.0.0.1:%d" % dst.port]
                       + list(args), capture_output=True, text=True, timeout=1200,
                       env=cli_env())
    return p.returncode, p.stdout, p.stderr, time.time() - t0


def fill_small(r):
    harness.fill_kinds(r, "small:")
    r.execute_command("CBF.ADD", "small:cbf", "x")   # counted twice
    r.execute_command("RS.ADD", "small:rs", "r1", "r2", "r3")


def small_answers(r):
    return (list(r.execute_command("BF.MEXISTS", "small:bf",
                                   *["b%d" % i for i in range(0, 3000, 3)])),
            [r.execute_command("CF.EXISTS", "small:cf", "c%d" % i) for i in range(0, 400, 7)],
            r.execute_command("CBF.COUNT", "small:cbf", "x"),
            r.execute_command("WF.EXISTS", "small:wf", "w"),
            r.execute_command("RS.CARD", "small:rs"),
            r.execute_command("RS.ISMEMBER", "small:rs", "r2"),
            r.execute_command("BF.EXISTS", "small:ttl", "t"))


def info(r, key):
    got = r.execute_command("BF.INFO", key)
    return dict(zip(got[0::2], got[1::2]))


def scandump_hash(r, key):
    """SHA-256 over every BF.SCANDUMP chunk of key, and the chunk count."""
    h, it, n = hashlib.sha256(), 0, 0
    while True:
        it, data = r.execute_command("BF.SCANDUMP", key, it)
        if it == 0:
            return h.hexdigest(), n
        h.update(b"%d:" % it)
        h.update(data)
        n += 1


def big_answers(r):
    return (list(r.execute_command("BF.MEXISTS", "big", *ITEMS)),
            list(r.execute_command("BF.MEXISTS", "big", *ABSENT)))


class Source:
    """The SRC server, filled once: its answers, the big key's hash."""
    srv = None
    want = None


def make_source():
    srv = Server()
    r = srv.client(socket_timeout=300)
    r.execute_command("BF.RESERVE", "big", "0.01", CAPACITY)
    r.execute_command("BF.MADD", "big", *ITEMS)
    usage = r.memory_usage("big")
    assert BIG_BYTES * 0.9 < usage < BIG_BYTES * 1.2, (usage, BIG_BYTES)
    fill_small(r)
    Source.srv = srv
    Source.want = {"small": small_answers(r), "big": big_answers(r), "info": info(r, "big"),
                   "hash": scandump_hash(r, "big"), "usage": usage}
    assert all(Source.want["big"][0])
    print("SRC: big is %.1f MB (MEMORY USAGE), %d SCANDUMP chunks"
          % (usage / 1e6, Source.want["hash"][1]))


def restart_source():
    """SRC stopped and started again: a filter above map-threshold (64 MiB)
    is used in place from its snapshot file, outside used_memory. MEMORY
    USAGE still counts it (else copy would DUMP it whole: a 1.2 GB DUMP
    once closed the connection, found by bench/bench_scale.py), and the
    copies below are made from that mapped key."""
    srv = Source.srv
    assert srv.stop() == 0
    srv.start()
    r = srv.client(socket_timeout=300)
    usage = r.memory_usage("big")
    assert abs(usage - Source.want["usage"]) < Source.want["usage"] / 100, (
        usage, Source.want["usage"])
    if not SANITIZED:   # (64 MB is under map-threshold: in the heap again)
        assert r.info("memory")["used_memory"] < BIG_BYTES // 10, r.info("memory")
    assert big_answers(r) == Source.want["big"]


def check_copy(dst, what, same_usage):
    rc, out, err, secs = copy(Source.srv, dst)
    assert rc == 0, (rc, out, err)
    assert out.strip() == "copied 7 keys", out
    print("copy to %s: %.1f s for %.1f MB (%.0f MB/s)"
          % (what, secs, Source.want["usage"] / 1e6, Source.want["usage"] / 1e6 / secs))
    r = dst.client(socket_timeout=300)
    assert small_answers(r) == Source.want["small"]
    assert 0 < r.pttl("small:ttl") <= 600000
    assert r.pttl("big") == -1
    assert big_answers(r) == Source.want["big"]
    assert info(r, "big") == Source.want["info"], (info(r, "big"), Source.want["info"])
    assert scandump_hash(r, "big") == Source.want["hash"]
    # (and its MEMORY USAGE is SRC's, within 1%, between bloomkit-servers)
    if same_usage:
        assert abs(r.memory_usage("big") - Source.want["usage"]) < Source.want["usage"] / 100


def to_bloomkit_server():
    with Server() as dst:
        check_copy(dst, "bloomkit-server", True)
        assert dst.stop() == 0


def to_redis_with_module():
    with redis_server() as dst:
        check_copy(dst, "redis-server + bloomkit.so", False)


def small_by_chunks():
    """--chunk-threshold 0: every kind with SCANDUMP by chunks."""
    with Server() as dst:
        rc, out, err, _ = copy(Source.srv, dst, "--pattern", "small:*", "--chunk-threshold", "0")
        assert rc == 0, (rc, out, err)
        assert out.strip() == "copied 6 keys", out
        r = dst.client()
        assert small_answers(r) == Source.want["small"]
        assert 0 < r.pttl("small:ttl") <= 600000
        # twice: refused by name, then --replace
        rc, out, err, _ = copy(Source.srv, dst, "--pattern", "small:*", "--chunks")
        assert rc == 2, (rc, out, err)
        assert "small:cbf: DST 127.0.0.1:%d: exists (--replace overwrites it)" % dst.port \
            in err, err
        rc, out, err, _ = copy(Source.srv, dst, "--pattern", "small:*", "--chunks",
                               "--replace")
        assert rc == 0, (rc, out, err)
        assert small_answers(r) == Source.want["small"]
        assert dst.stop() == 0


def dst_refuses():
    """DST without room for the big key: named with the side, the rest copied."""
    with Server("--maxmemory", str(BIG_BYTES // 4)) as dst:
        # (the sanitized build's 64 MB key is under the default threshold:
        # ask for chunks above 32 MiB so both builds take the chunk path)
        rc, out, err, _ = copy(Source.srv, dst, "--chunk-threshold", "32M")
        assert rc == 2, (rc, out, err)
        assert "copied 6 keys (1 failed, 0 deleted meanwhile)" in out, out
        lines = [line for line in err.splitlines() if line]
        assert len(lines) == 1, err
        assert lines[0].startswith("bloomkit: copy: big: DST 127.0.0.1:%d: BF.LOADCHUNK: "
                                   % dst.port), err
        r = dst.client()
        assert small_answers(r) == Source.want["small"]
        assert r.exists("big") == 0   # no half-loaded key left behind
        # a key of another kind where the big one goes, no --replace
        r.config_set("maxmemory", "0")
        r.execute_command("CF.ADD", "big", "something else")
        rc, out, err, _ = copy(Source.srv, dst, "--pattern", "big", "--chunk-threshold", "32M")
        assert rc == 2, (rc, out, err)
        assert "bloomkit: copy: big: DST 127.0.0.1:%d: exists (--replace overwrites it)" \
            % dst.port in err, err
        assert r.execute_command("CF.EXISTS", "big", "something else") == 1
        assert dst.stop() == 0


def src_connection_closed():
    """A DUMP reply over SRC's client-output-buffer-limit (6 MB: a 4 MiB
    chunk fits) closes the connection: the key is named with SRC and the node, and the copy goes
    on with the next keys on a new connection."""
    with Server("--client-output-buffer-limit", "6mb") as src, Server() as dst:
        r = src.client()
        r.execute_command("BF.RESERVE", "fat", "0.01", 8 << 20)   # about 10 MB
        r.execute_command("BF.ADD", "fat", "x")
        thin = ["thin:%d" % i for i in range(40)]
        for k in thin:
            r.execute_command("BF.ADD", k, k)
        fat = r.memory_usage("fat")
        # a threshold of exactly its size: the fat key by DUMP, in a
        # pipeline of its own (the others fit no group beside it)
        rc, out, err, _ = copy(src, dst, "--chunk-threshold", str(fat))
        assert rc == 2, (rc, out, err)
        named = [line for line in err.splitlines() if line]
        assert len(named) == 1, err
        assert named[0].startswith("bloomkit: copy: fat: SRC 127.0.0.1:%d: " % src.port), err
        assert named[0].endswith(" (DUMP)"), err
        assert "copied 40 keys (1 failed, 0 deleted meanwhile)" in out, out
        d = dst.client()
        assert d.exists("fat") == 0
        assert all(d.execute_command("BF.EXISTS", k, k) == 1 for k in thin)
        # by chunks (a threshold under its size), it goes through
        rc, out, err, _ = copy(src, dst, "--pattern", "fat", "--chunk-threshold", "1M")
        assert rc == 0, (rc, out, err)
        assert out.strip() == "copied 1 keys", out
        assert d.execute_command("BF.EXISTS", "fat", "x") == 1
        assert src.stop() == 0 and dst.stop() == 0


def main():
    run = Runner("bloomkit copy: big filters by chunks, errors named")
    try:
        run.check("SRC: a %d MB filter and small keys" % (BIG_BYTES >> 20), make_source)
        if run.failed == 0:
            run.check("SRC restarted: the big key mapped, MEMORY USAGE counts it",
                      restart_source)
            run.check("copy to bloomkit-server", to_bloomkit_server)
            run.check("copy to redis-server with bloomkit.so", to_redis_with_module)
            run.check("--chunk-threshold 0: every kind by chunks", small_by_chunks)
            run.check("DST refuses the big key: key and side named", dst_refuses)
        run.check("SRC closes the connection: key and side named, copy goes on",
                  src_connection_closed)
    finally:
        if Source.srv is not None:
            Source.srv.close()
    run.finish()


if __name__ == "__main__":
    main()
