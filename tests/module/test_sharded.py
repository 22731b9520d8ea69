#!/usr/bin/python3
"""A sharded filter across every master of a 3-master Redis Cluster.

The cluster is the one of test_cluster.py (three redis-server processes
with bloomkit.so on loopback ports, joined by `redis-cli --cluster create`;
modutil.py finds the module). The `bloomkit` CLI ($BLOOMKIT_CLI, CTest
passes the build's; else build/release/cli/bloomkit) creates a filter of
64 pieces NAME{0..63} (docs/MODULE.md, "Sharded filters"), adds 20,000
items from a file, and must then find every one of them (exact count),
report absent items at no more than the rate asked plus 5 binomial
standard deviations, have pieces on every master, and total its items in
`cluster info` consistently with the adds. A wrong --shards and a node
refusing connections are errors (exit 2) naming the problem. Every
process is killed at the end.
"""
import math
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import modutil  # noqa: E402

modutil.require()
import test_cluster  # noqa: E402  (start_cluster, NODES)
from harness import Runner, free_port  # noqa: E402

CLI = os.environ.get("BLOOMKIT_CLI") or os.path.join(
    modutil.ROOT, "build", "release", "cli", "bloomkit")
N = 20000
P = 0.01
SHARDS = 64          # the CLI's default
NAME = "users"
TMP = tempfile.mkdtemp(prefix="bk-sharded-")
PRESENT = os.path.join(TMP, "present.txt")
ABSENT = os.path.join(TMP, "absent.txt")
STATE = {}


def nodes_arg():
    # one live node is enough; the second address is the cluster's too
    return "127.0.0.1:%d,127.0.0.1:%d" % (test_cluster.NODES[0].port,
                                          test_cluster.NODES[1].port)


def cli_env():
    """In a sanitizer build the CLI carries its own runtime: no LD_PRELOAD,
    and leak detection on (it is off for redis-server)."""
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:
        env.pop("LD_PRELOAD", None)
        env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=1"
    return env


def bloomkit(*args, nodes=None):
    cmd = [CLI, "cluster", args[0], "--nodes", nodes or nodes_arg()] + list(args[1:])
    p = subprocess.run(cmd, capture_output=True, timeout=120, env=cli_env())
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def sigma_bound(n, p):
    """n p plus 5 binomial standard deviations."""
    return n * p + 5 * math.sqrt(n * p * (1 - p))


def write_items():
    with open(PRESENT, "w") as f:
        f.writelines("user:%d@example.org\n" % i for i in range(N))
    with open(ABSENT, "w") as f:
        f.writelines("nobody:%d@example.net\n" % i for i in range(N))


def create():
    rc, out, err = bloomkit("create", NAME, "--capacity", str(N), "--error", str(P))
    assert rc == 0, (rc, err)
    assert out == "", out
    assert "%d bloom pieces" % SHARDS in err and "on 3 masters" in err, err
    # created again: refused before anything changes
    rc, out, err = bloomkit("create", NAME, "--capacity", str(N), "--error", str(P))
    assert rc == 2 and "already exists" in err, (rc, err)


def pieces_everywhere():
    r0 = test_cluster.NODES[0].client()
    # the key scheme: NAME{i} hashes only "i"
    for i in range(SHARDS):
        assert r0.cluster("keyslot", "%s{%d}" % (NAME, i)) == \
            r0.cluster("keyslot", str(i))
    sizes = test_cluster.keys_per_node()
    assert sum(sizes) == SHARDS and all(n > 0 for n in sizes), sizes
    for s in test_cluster.NODES:
        for key in s.client().keys("*"):
            assert re.fullmatch(r"%s\{\d+\}" % NAME, key.decode()), key
            assert s.client().type(key) == b"bkbloom--"


def add():
    rc, out, err = bloomkit("add", NAME, PRESENT)
    assert rc == 0, (rc, err)
    m = re.search(r"(\d+) items added, (\d+) new \(64 pieces on 3 masters\)", err)
    assert m, err
    assert int(m.group(1)) == N, err
    print("  " + err.strip())
    STATE["new"] = int(m.group(2))
    # an add answers "not new" only for a false positive of its piece
    assert N - STATE["new"] <= sigma_bound(N, P), STATE["new"]


def check_present():
    rc, out, err = bloomkit("check", NAME, PRESENT)
    assert rc == 0, (rc, err)
    lines = out.splitlines()
    assert len(lines) == N, len(lines)
    with open(PRESENT) as f:
        assert lines == f.read().splitlines()   # all, in input order
    rc, out, err = bloomkit("check", NAME, "-c", PRESENT)
    assert rc == 0 and out == "%d\n" % N, (rc, out, err)
    rc, out, err = bloomkit("check", NAME, "-v", PRESENT)
    assert rc == 1 and out == "", (rc, out, err)


def check_absent():
    rc, out, err = bloomkit("check", NAME, "-c", ABSENT)
    assert rc in (0, 1), (rc, err)
    fp = int(out)
    bound = sigma_bound(N, P)
    print("  false positives: %d of %d (bound %.1f)" % (fp, N, bound))
    assert fp <= bound, (fp, bound)
    rc, out, err = bloomkit("check", NAME, "-v", ABSENT)
    assert len(out.splitlines()) == N - fp


def info():
    rc, out, err = bloomkit("info", NAME)
    assert rc == 0, (rc, err)
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", out, re.M))
    print("".join("  " + line + "\n" for line in out.splitlines()[:12]))
    assert fields["type"] == "bloom", out
    assert fields["pieces"].startswith("64 "), out
    assert fields["masters"] == "3 of 3", out
    # BF "items" counts the adds that answered new: exactly add's count
    assert int(fields["items"]) == STATE["new"], (fields["items"], STATE)
    assert N - sigma_bound(N, P) <= int(fields["items"]) <= N
    assert int(fields["capacity"].split()[0]) >= N, out
    # one line per piece, every one on a master
    pieces = re.findall(r"^%s\{(\d+)\}\s+127\.0\.0\.1:(\d+)" % NAME, out, re.M)
    assert sorted(int(i) for i, _ in pieces) == list(range(SHARDS)), out
    ports = {s.port for s in test_cluster.NODES}
    assert {int(p) for _, p in pieces} == ports, out


def wrong_shards():
    rc, out, err = bloomkit("check", NAME, "--shards", "32", PRESENT)
    assert rc == 2 and "%s{32} exists" % NAME in err, (rc, err)
    rc, out, err = bloomkit("add", NAME, "--shards", "65", PRESENT)
    assert rc == 2 and "%s{64} does not exist" % NAME in err, (rc, err)
    rc, out, err = bloomkit("info", "nosuch")
    assert rc == 2 and "nosuch{63} does not exist" in err, (rc, err)


def cuckoo():
    rc, out, err = bloomkit("create", "cf", "--type", "cuckoo", "-n", "3000",
                            "--shards", "8", "-q")
    assert rc == 0 and err == "", (rc, err)
    items = "".join("c%d\n" % i for i in range(2000)).encode()
    cmd = [CLI, "cluster", "add", "--nodes", nodes_arg(), "cf", "--shards", "8"]
    p = subprocess.run(cmd, input=items, capture_output=True, timeout=60,
                       env=cli_env())
    assert p.returncode == 0 and b"2000 items added, 2000 new" in p.stderr, p
    cmd[2] = "check"
    p = subprocess.run(cmd + ["-c"], input=items, capture_output=True,
                       timeout=60, env=cli_env())
    assert p.returncode == 0 and p.stdout == b"2000\n", p
    rc, out, err = bloomkit("info", "cf", "--shards", "8")
    assert rc == 0 and re.search(r"^items:\s+2000$", out, re.M), (rc, out, err)


def refused():
    port = free_port()   # nothing listens there
    rc, out, err = bloomkit("check", NAME, PRESENT, nodes="127.0.0.1:%d" % port)
    assert rc == 2, (rc, err)
    assert err == ("bloomkit: cluster check: 127.0.0.1:%d: cannot connect: "
                   "Connection refused\n" % port), err
    assert out == ""


def main():
    run = Runner("module sharded")
    try:
        write_items()
        run.check("3-master cluster created", test_cluster.start_cluster)
        if run.failed == 0:
            run.check("cluster create: 64 pieces", create)
            run.check("pieces on every master, NAME{i} in the slot of i",
                      pieces_everywhere)
            run.check("cluster add: 20,000 items", add)
            run.check("cluster check finds all 20,000", check_present)
            run.check("absent items at the rate asked", check_absent)
            run.check("cluster info totals", info)
            run.check("a wrong --shards is refused", wrong_shards)
            run.check("a cuckoo sharded filter", cuckoo)
            run.check("a node refusing connections: exit 2, named", refused)
    finally:
        for s in test_cluster.NODES:
            s.close()
        for f in (PRESENT, ABSENT):
            if os.path.exists(f):
                os.remove(f)
        os.rmdir(TMP)
    run.finish()


if __name__ == "__main__":
    main()
