#!/usr/bin/python3
"""bloomkit.so in a 3-master Redis Cluster on loopback ports.

Three redis-server processes (cluster-enabled, each in its own temporary
directory, module loaded) are joined with `redis-cli --cluster create`.
Filters of every kind are created and queried through `redis-cli -c`
(which follows MOVED redirections) and through python3-redis's
RedisCluster (which routes by the key positions the module registered);
keys land on every master; multi-key commands obey hash tags
(BF.MERGE across slots is refused with CROSSSLOT, within one tag it
works). Every step has a timeout and every process is killed at the end.
"""
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
import redis  # noqa: E402
from redis.cluster import ClusterNode, RedisCluster  # noqa: E402
from harness import Runner, Server, free_port, loadchunks, scandump  # noqa: E402

NODES = []


def cli(port, *args, cluster=True, timeout=30):
    cmd = ["redis-cli", "-p", str(port)] + (["-c"] if cluster else []) + list(args)
    p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    assert p.returncode == 0, (cmd, p.stdout, p.stderr)
    return p.stdout.decode().strip()


def cluster_port():
    """A free port P with P + 10000 (the cluster bus) free too; Redis
    wants P <= 55535."""
    for _ in range(500):
        p = free_port()
        if p > 55535:
            continue
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", p + 10000))
        except OSError:
            continue
        return p
    raise AssertionError("no free port pair for a cluster node")


def start_cluster():
    for _ in range(3):
        NODES.append(Server("--cluster-enabled", "yes",
                            "--cluster-config-file", "nodes.conf",
                            "--cluster-node-timeout", "5000", port=cluster_port()))
    addrs = ["127.0.0.1:%d" % s.port for s in NODES]
    p = subprocess.run(["redis-cli", "--cluster", "create"] + addrs +
                       ["--cluster-replicas", "0", "--cluster-yes"],
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    deadline = time.time() + 30
    while time.time() < deadline:
        if all(s.client().cluster("info")["cluster_state"] == "ok" for s in NODES):
            return
        time.sleep(0.1)
    raise AssertionError("the cluster did not reach state ok")


def keys_per_node():
    return [s.client().dbsize() for s in NODES]


def via_redis_cli():
    port = NODES[0].port
    for i in range(30):
        assert cli(port, "BF.ADD", "cli:bf:%d" % i, "x") == "1"
        assert cli(port, "CF.ADD", "cli:cf:%d" % i, "x") == "1"
    for i in range(30):
        assert cli(NODES[i % 3].port, "BF.EXISTS", "cli:bf:%d" % i, "x") == "1"
        assert cli(NODES[i % 3].port, "BF.EXISTS", "cli:bf:%d" % i, "nope") == "0"
        assert cli(NODES[(i + 1) % 3].port, "CF.COUNT", "cli:cf:%d" % i, "x") == "1"
        assert cli(NODES[2].port, "TYPE", "cli:cf:%d" % i) == "bkcuckoo-"
    assert all(n > 0 for n in keys_per_node()), keys_per_node()
    # without -c, a node answers MOVED for a key it does not own
    moved = 0
    for i in range(30):
        out = cli(port, "BF.EXISTS", "cli:bf:%d" % i, "x", cluster=False)
        moved += out.startswith("MOVED") or "MOVED" in out
    assert moved > 0


def via_redis_cluster():
    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", s.port) for s in NODES],
                      socket_timeout=10)
    try:
        for i in range(60):
            k = "py:%d" % i
            assert rc.execute_command("BF.RESERVE", k + ":bf", "0.01", "1000") in (b"OK", True)
            assert rc.execute_command("BF.MADD", k + ":bf", "a", "b") == [1, 1]
            assert rc.execute_command("CF.INSERT", k + ":cf", "ITEMS", "a", "b") == [1, 1]
            assert rc.execute_command("CBF.ADD", k + ":cbf", "a") == 1
            assert rc.execute_command("WF.RESERVE", k + ":wf", "0.01", "100", "600000") in (b"OK", True)
            assert rc.execute_command("WF.ADD", k + ":wf", "a") == 1
        for i in range(60):
            k = "py:%d" % i
            assert rc.execute_command("BF.MEXISTS", k + ":bf", "a", "b", "c") == [1, 1, 0]
            assert rc.execute_command("CF.EXISTS", k + ":cf", "b") == 1
            assert rc.execute_command("CBF.COUNT", k + ":cbf", "a") == 1
            assert rc.execute_command("WF.EXISTS", k + ":wf", "a") == 1
            assert rc.execute_command("BF.CARD", k + ":bf") == 2
        # a dump moved between slots (and nodes) with SCANDUMP / LOADCHUNK
        loadchunks(rc, "BF", "py:copy", scandump(rc, "BF", "py:0:bf"))
        assert rc.execute_command("BF.MEXISTS", "py:copy", "a", "b") == [1, 1]
        # multi-key: one hash tag works, two slots are refused
        rc.execute_command("BF.ADD", "{m}a", "1")
        rc.execute_command("BF.ADD", "{m}b", "2")
        assert rc.execute_command("BF.MERGE", "{m}a", "{m}b") in (b"OK", True)
        assert rc.execute_command("BF.MEXISTS", "{m}a", "1", "2") == [1, 1]
    finally:
        rc.close()
    port = NODES[0].port
    out = cli(port, "BF.MERGE", "py:1:bf", "py:2:bf")
    assert "CROSSSLOT" in out or "MOVED" in out, out
    assert all(n > 60 for n in keys_per_node()), keys_per_node()


def main():
    run = Runner("module cluster")
    try:
        run.check("3-master cluster created", start_cluster)
        if run.failed == 0:
            run.check("BF/CF through redis-cli -c", via_redis_cli)
            run.check("every kind through RedisCluster", via_redis_cluster)
    finally:
        for s in NODES:
            s.close()
    run.finish()


if __name__ == "__main__":
    main()
