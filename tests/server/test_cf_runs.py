#!/usr/bin/python3
"""Pipelined CF.ADD / CF.ADDNX runs on one key (issue 30).

bloomkit-server takes a run of CF.ADD (or CF.ADDNX) requests to one key as
one call (bkc_cf_add_many) and logs the adds to an existing key as one
"CF.INSERT[NX] key NOCREATE ITEMS ..." record per 64 attempted items
instead of one record each. What must hold:

- the replies and the filter are those of the same commands sent one at a
  time (no pipeline: each is a run of one), errors of a full filter
  included: the DUMPs are equal byte for byte;
- a SIGKILL and a restart replay the log to the same bytes, for a
  reserved filter that fills up (errors logged as attempts), a growable
  key the run itself creates, and CF.ADDNX runs;
- the log holds the grouped records (the saving is real), and a lone add
  is still its own CF.ADD.
"""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import MODULE, Runner, Server  # noqa: E402

run = Runner("test_cf_runs")


def log_bytes(srv):
    data = b""
    for path in sorted(glob.glob(os.path.join(srv.dir, "appendonly*"))):
        with open(path, "rb") as f:
            data += f.read()
    return data


def workload(key):
    """(command, item) pairs: adds past a small filter's room, repeats,
    CF.ADDNX runs in between."""
    cmds = []
    for i in range(700):
        cmds.append(("CF.ADD", "item:%d" % (i % 450)))
        if i % 97 == 0:
            cmds += [("CF.ADDNX", "item:%d" % j) for j in range(i, i + 5)]
    return cmds


def send(r, key, cmds, pipelined):
    if not pipelined:
        out = []
        for cmd, item in cmds:
            try:
                out.append(r.execute_command(cmd, key, item))
            except Exception as e:  # a full filter answers an error
                out.append(str(e))
        return out
    p = r.pipeline(transaction=False)
    for cmd, item in cmds:
        p.execute_command(cmd, key, item)
    return [str(x) if isinstance(x, Exception) else x
            for x in p.execute(raise_on_error=False)]


def runs_equal_single_commands_and_replay():
    srv = Server("--auto-aof-rewrite-percentage", "0")
    try:
        r = srv.client()
        for key in ("piped", "single"):
            # 64 buckets of 2: fills within the workload, no expansion
            r.execute_command("CF.RESERVE", key, 128, "BUCKETSIZE", 2,
                              "MAXITERATIONS", 20, "EXPANSION", 0)
        cmds = workload("x")
        piped = send(r, "piped", cmds, True)
        single = send(r, "single", cmds, False)
        assert piped == single, [(i, a, b) for i, (a, b) in
                                 enumerate(zip(piped, single)) if a != b][:5]
        full = sum(1 for x in piped if isinstance(x, str))
        assert full > 100, "the filter never filled: %d errors" % full
        assert r.dump("piped") == r.dump("single")
        # a growable key the first add of the run creates
        grow = send(r, "grow", [("CF.ADD", "g%d" % i) for i in range(3000)], True)
        assert grow == [1] * 3000
        dumps = {k: r.dump(k) for k in ("piped", "single", "grow")}
        infos = {k: r.execute_command("CF.INFO", k) for k in dumps}
        log = log_bytes(srv)
        assert b"CF.INSERT" in log and b"NOCREATE" in log and b"CF.INSERTNX" in log
        srv.kill()
        srv.restart()
        r = srv.client()
        for k, d in dumps.items():
            assert r.dump(k) == d, "%s differs after the replay" % k
            assert r.execute_command("CF.INFO", k) == infos[k], k
        assert r.execute_command("CF.MEXISTS", "grow", "g0", "g2999") == [1, 1]
    finally:
        srv.close()


if not MODULE:
    run.check("CF.ADD runs answer and replay as single commands",
              runs_equal_single_commands_and_replay)
run.finish()
