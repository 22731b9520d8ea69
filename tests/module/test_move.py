#!/usr/bin/python3
"""Moving filters between bloomkit-server and Redis with bloomkit.so.

- DUMP on bloomkit-server, RESTORE on redis-server with the module, and
  back: the filter answers the same (every kind, TTL kept); Redis's own
  DUMP of an empty filter is LZF-compressed and bloomkit-server reads it.
- `bloomkit copy` from bloomkit-server into a 3-master cluster (keys land
  on every master) and from the cluster back into a new bloomkit-server,
  with --pattern; a key DST already has is refused without --replace.
- `bloomkit cluster create/add/check` against a standalone bloomkit-server
  (one node holding every slot).
- MOVED and ASK: slots migrate between masters (redis-cli --cluster
  reshard) while `bloomkit cluster add`, `check` and `copy` run; every
  item is found afterwards.
$BLOOMKIT_SERVER and $BLOOMKIT_CLI name the build's programs (CTest sets
them); every process is killed at the end.
"""
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import modutil  # noqa: E402

modutil.require()
import harness  # noqa: E402
import test_cluster  # noqa: E402  (start_cluster, NODES)
from harness import Runner, Server  # noqa: E402

CLI = os.environ.get("BLOOMKIT_CLI") or os.path.join(
    modutil.ROOT, "build", "release", "cli", "bloomkit")
TMP = harness.scratch_dir("bk-move-")


def bloomkit_server(*flags):
    """bloomkit-server (not redis-server) from the harness."""
    saved = harness.MODULE
    harness.MODULE = None
    try:
        return Server(*flags)
    finally:
        harness.MODULE = saved


def cli_env():
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:
        env.pop("LD_PRELOAD", None)
        env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=1"
    return env


def bloomkit(*args, expect=0):
    p = subprocess.run([CLI] + list(args), capture_output=True, timeout=300, env=cli_env())
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode == expect, (args, p.returncode, out, err)
    return out, err


def answers(r):
    """What the filters say: (bf hits, bf false positives, cf hits, ...)."""
    bf = r.execute_command("BF.MEXISTS", "bf", *["b%d" % i for i in range(1500)])
    fp = r.execute_command("BF.MEXISTS", "bf", *["absent%d" % i for i in range(2000)])
    cf = [r.execute_command("CF.EXISTS", "cf", "c%d" % i) for i in range(0, 300, 7)]
    return (list(bf), list(fp), cf, r.execute_command("CBF.COUNT", "cbf", "x"),
            r.execute_command("WF.EXISTS", "wf", "w"), r.execute_command("BF.CARD", "bf"))


def dump_restore_both_ways():
    with bloomkit_server() as bk, Server() as rs:
        a, b = bk.client(), rs.client()
        harness.fill_kinds(a)
        want = answers(a)
        assert all(want[0]) and all(want[2])
        for k in ("bf", "cf", "cbf", "wf", "ttl"):
            b.restore(k, max(a.pttl(k), 0), a.dump(k))
        assert answers(b) == want
        assert 0 < b.pttl("ttl") <= 600000
        assert b.type("bf") == a.type("bf")
        # and back, into a second bloomkit-server
        with bloomkit_server() as bk2:
            c = bk2.client()
            for k in ("bf", "cf", "cbf", "wf"):
                c.restore(k, 0, b.dump(k))
            assert answers(c) == want
            # Redis compresses the payload of an empty filter (LZF)
            b.execute_command("BF.RESERVE", "empty", "0.001", "100000")
            payload = b.dump("empty")
            assert len(payload) < 10000, len(payload)   # 180 KB of zeros, compressed
            c.restore("empty", 0, payload)
            info = c.execute_command("BF.INFO", "empty")
            assert dict(zip(info[0::2], info[1::2]))[b"Capacity"] == 100000, info
            assert c.execute_command("BF.EXISTS", "empty", "x") == 0
            # a payload Redis refuses to read is refused here too (checksum)
            bad = bytearray(a.dump("bf"))
            bad[30] ^= 0xff
            for r in (b, c):
                try:
                    r.restore("bad", 0, bytes(bad))
                    raise AssertionError("damaged payload restored")
                except harness.redis.exceptions.ResponseError as e:
                    assert "checksum" in str(e), str(e)
            assert bk2.stop() == 0
        assert bk.stop() == 0


def nodes_arg():
    return ",".join("127.0.0.1:%d" % s.port for s in test_cluster.NODES[:2])


def cluster_keys():
    return [s.client().dbsize() for s in test_cluster.NODES]


def copy_to_cluster_and_back():
    with bloomkit_server() as bk:
        a = bk.client()
        harness.fill_kinds(a)
        for i in range(200):
            a.execute_command("BF.ADD", "many:%d" % i, "v%d" % i)
        want = answers(a)
        src = "127.0.0.1:%d" % bk.port
        out, _ = bloomkit("copy", src, nodes_arg())
        assert out.strip() == "copied 205 keys", out
        assert all(n > 30 for n in cluster_keys()), cluster_keys()
        # again: every key exists now
        out, err = bloomkit("copy", src, nodes_arg(), "--pattern", "many:1*", expect=2)
        assert "BUSYKEY" in err and "--replace" in err, err
        out, _ = bloomkit("copy", src, nodes_arg(), "--pattern", "many:1*", "--replace")
        assert out.strip() == "copied 111 keys", out
        with bloomkit_server() as back:
            out, _ = bloomkit("copy", nodes_arg(), "127.0.0.1:%d" % back.port)
            assert out.strip() == "copied 205 keys", out
            c = back.client()
            assert answers(c) == want
            assert 0 < c.pttl("ttl") <= 600000
            for i in range(200):
                assert c.execute_command("BF.EXISTS", "many:%d" % i, "v%d" % i) == 1
            assert back.stop() == 0
        out, err = bloomkit("copy", src, "127.0.0.1:1", expect=2)
        assert "127.0.0.1:1" in err, err
        _, err = bloomkit("copy", src, expect=2)
        assert "expected SRC DST" in err, err
        assert bk.stop() == 0


def cluster_on_standalone():
    with bloomkit_server() as bk:
        node = "127.0.0.1:%d" % bk.port
        items = os.path.join(TMP, "standalone.txt")
        with open(items, "w") as f:
            f.write("".join("s%d\n" % i for i in range(3000)))
        bloomkit("cluster", "create", "--nodes", node, "solo", "-n", "3000", "-e", "0.01",
                 "--shards", "8")
        bloomkit("cluster", "add", "--nodes", node, "solo", items, "--shards", "8")
        out, _ = bloomkit("cluster", "check", "--nodes", node, "solo", items, "--shards",
                          "8", "--total")
        assert out.strip().endswith("3000") or "3000" in out, out
        r = bk.client()
        assert sorted(k.decode() for k in r.keys("solo*")) == \
            sorted("solo{%d}" % i for i in range(8))
        assert bk.stop() == 0


def node_ids():
    ids = {}
    for s in test_cluster.NODES:
        ids[s.port] = s.client().execute_command("CLUSTER", "MYID").decode()
    return ids


def reshard(src_port, dst_port, slots):
    ids = node_ids()
    p = subprocess.run(
        ["redis-cli", "--cluster", "reshard", "127.0.0.1:%d" % src_port,
         "--cluster-from", ids[src_port], "--cluster-to", ids[dst_port],
         "--cluster-slots", str(slots), "--cluster-yes", "--cluster-pipeline", "10"],
        capture_output=True, timeout=300)
    assert p.returncode == 0, p.stdout.decode()[-2000:] + p.stderr.decode()


def moved_and_ask_during_runs():
    items = os.path.join(TMP, "migrate.txt")
    n = 20000
    with open(items, "w") as f:
        f.write("".join("m%d\n" % i for i in range(n)))
    nodes = nodes_arg()
    bloomkit("cluster", "create", "--nodes", nodes, "mig", "-n", str(n), "-e", "0.01")
    ports = [s.port for s in test_cluster.NODES]
    errors = []

    def migrate():
        try:
            for a, b in ((0, 1), (1, 2), (2, 0), (0, 2)):
                reshard(ports[a], ports[b], 1500)
        except Exception as e:   # reported by the main thread
            errors.append(e)

    t = threading.Thread(target=migrate)
    t.start()
    runs = 0
    while t.is_alive() or runs < 2:
        bloomkit("cluster", "add", "--nodes", nodes, "mig", items)
        out, _ = bloomkit("cluster", "check", "--nodes", nodes, "mig", items, "--total")
        assert out.split()[-1] == str(n), out
        runs += 1
    t.join()
    assert not errors, errors
    # the runs met the migration: the masters answered MOVED / ASK
    redirects = {}
    for srv in test_cluster.NODES:
        for k, v in srv.client().info("errorstats").items():
            if k in ("errorstat_MOVED", "errorstat_ASK"):
                redirects[k] = redirects.get(k, 0) + int(str(v).split("=")[1])
    print("redirections answered during the runs: %s (%d runs)" % (redirects, runs))
    assert redirects.get("errorstat_MOVED", 0) > 0, redirects
    out, _ = bloomkit("cluster", "check", "--nodes", nodes, "mig", items, "--total")
    assert out.split()[-1] == str(n), out
    # the pieces really moved: every master still holds keys, slots changed hands
    assert all(k > 0 for k in cluster_keys()), cluster_keys()
    # copy out of a cluster whose slots just moved
    with bloomkit_server() as back:
        out, _ = bloomkit("copy", nodes, "127.0.0.1:%d" % back.port, "--pattern", "mig{*")
        assert out.strip() == "copied 64 keys", out
        assert back.stop() == 0


def main():
    run = Runner("moving filters: DUMP/RESTORE, bloomkit copy, MOVED/ASK")
    try:
        run.check("DUMP/RESTORE bloomkit-server <-> Redis+module", dump_restore_both_ways)
        run.check("bloomkit cluster against a standalone server", cluster_on_standalone)
        run.check("3-master cluster created", test_cluster.start_cluster)
        if run.failed == 0:
            run.check("bloomkit copy: server -> cluster -> server", copy_to_cluster_and_back)
            run.check("MOVED/ASK: slots migrate during add/check/copy",
                      moved_and_ask_during_runs)
    finally:
        for s in test_cluster.NODES:
            s.close()
    run.finish()


if __name__ == "__main__":
    main()
