#!/usr/bin/python3
"""CF keys an add creates are growable filters (issue 29), seen from
python-redis as RedisBloom's cuckoo filters that never fill.

RedisBloom's default CF key (capacity 1024, expansion 1) fails every add
from about 31,000 items with "Maximum expansions reached", and its rate
grows with every stage. A key created by CF.ADD here takes 50,000 items
(the first 2,000 by CF.ADD in a MULTI/EXEC pipeline, the rest by CF.INSERT):
every add must answer 1, every item must be found, and the absent items
that answer 1 must stay under the 1% docs/COMMANDS.md promises (3 sigma
above it at most). Copies are counted and deleted one at a time. CF.INFO,
read by python-redis's own parser, reports the items, one filter and
expansion 2. The same answers and CF.INFO after a restart from the log
(SIGKILL), from a snapshot, after DUMP/RESTORE and after
SCANDUMP/LOADCHUNK. With --cf-growable no, a key CF.ADD creates is
RedisBloom's chain again, while keys made before, replayed from the log,
stay growable (the log holds how each add made its key).

The functions taking (srv, r) also run inside Redis with bloomkit.so
(tests/module/test_cf_growable.py imports them).

Run with Debian's interpreter: /usr/bin/python3 tests/server/test_cf_growable.py
Prints "N passed, M failed"; exits non-zero on any failure.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import redis  # noqa: E402

import test_bf_growable as bf  # noqa: E402  (its items, info and answers)

N = 50000
FIRST = 2000     # of them, added one CF.ADD at a time
ABSENT = 20000
RATE = 0.01      # the promise (docs/COMMANDS.md)


def items(prefix, n):
    return bf.items(prefix, n)


def info(r, key):
    return bf.info(r, key, "CF")


def fill(r, key, keys):
    """keys[:FIRST] by CF.ADD, the rest by CF.INSERT, in one MULTI/EXEC
    pipeline; every reply."""
    pipe = r.pipeline(transaction=True)
    for k in keys[:FIRST]:
        pipe.execute_command("CF.ADD", key, k)
    for at in range(FIRST, len(keys), 1000):
        pipe.execute_command("CF.INSERT", key, "ITEMS", *keys[at:at + 1000])
    out = []
    for reply in pipe.execute():
        out.extend(reply if isinstance(reply, list) else [reply])
    return out


def answers(r, key):
    """(every item present, count of absent items answering 1)."""
    return bf.answers(r, key, "CF", N, ABSENT)


EXPECTED = {}


def check_same(r, key):
    bf.check_recorded(r, key, EXPECTED, answers, info)
    assert r.execute_command("CF.COUNT", key, "dup") == 2


# -- the tests ------------------------------------------------------------

def never_full(srv, r):
    replies = fill(r, "c", items("in", N))
    assert len(replies) == N and all(x == 1 for x in replies), \
        [x for x in replies if x != 1][:3]
    present, false_pos = answers(r, "c")
    assert present, "an item was lost"
    bound = ABSENT * RATE + 3 * (ABSENT * RATE * (1 - RATE)) ** 0.5
    assert false_pos <= bound, (false_pos, bound)
    # copies: counted, deleted one at a time
    for _ in range(3):
        assert r.execute_command("CF.ADD", "c", "dup") == 1
    assert r.execute_command("CF.ADDNX", "c", "dup") == 0
    assert r.execute_command("CF.COUNT", "c", "dup") == 3
    assert r.execute_command("CF.DEL", "c", "dup") == 1
    got = info(r, "c")
    assert got[b"Number of items inserted"] == N + 2, got
    assert got[b"Number of items deleted"] == 1, got
    assert got[b"Number of filters"] == 1 and got[b"Expansion rate"] == 2, got
    assert got[b"Bucket size"] == 2 and got[b"Max iterations"] == 20, got
    assert got[b"Number of buckets"] * 2 >= N, got
    assert 0 < got[b"Size"] < N * 4, got  # under 32 bits per item
    assert r.execute_command("MEMORY", "USAGE", "c") >= got[b"Size"]
    # python-redis's own parser of CF.INFO
    parsed = r.cf().info("c")
    assert parsed.insertedNum == N + 2 and parsed.deletedNum == 1, vars(parsed)
    assert parsed.filterNum == 1 and parsed.expansionRate == 2, vars(parsed)
    EXPECTED["fp"] = false_pos
    EXPECTED["info"] = got


def copies(srv, r):
    """DUMP/RESTORE and SCANDUMP/LOADCHUNK: the same answers and INFO."""
    from harness import copies_check
    copies_check(r, "c", check_same, r.cf())


restart_from_log = bf.restart_step(False, check_same, "c")
restart_from_snapshot = bf.restart_step(True, check_same, "c")


def replay_under_other_setting(srv, r):
    """The log holds how each add made its key (CF.INSERT ... GROWABLE):
    replayed with --cf-growable no, the keys come back as they were."""
    from harness import Server
    with Server() as s2:
        c = s2.client()
        c.execute_command("CF.ADD", "a", "x")
        c.execute_command("CF.INSERTNX", "b", "ITEMS", *items("b", 3000))
        before = (info(c, "a"), info(c, "b"))
        s2.kill()
        s2.flags = ["--cf-growable", "no"]
        s2.start()
        c = s2.client()
        assert (info(c, "a"), info(c, "b")) == before, ((info(c, "a"), info(c, "b")), before)
        assert all(c.execute_command("CF.MEXISTS", "b", *items("b", 3000)))
        c.execute_command("CF.ADD", "new", "x")  # made now: RedisBloom's chain
        got = info(c, "new")
        assert got[b"Number of buckets"] == 512 and got[b"Expansion rate"] == 1, got
        assert s2.stop() == 0


def setting_off(srv, r):
    """--cf-growable no: RedisBloom's chain of 1024-item stages, which
    stops at its 32nd stage."""
    from harness import Server
    with Server("--cf-growable", "no") as s2:
        c = s2.client()
        pipe = c.pipeline(transaction=False)
        for at in range(0, 40000, 1000):
            pipe.execute_command("CF.INSERT", "chain", "ITEMS", *items("k", 40000)[at:at + 1000])
        replies = [x for part in pipe.execute() for x in part]
        assert -1 in replies, "RedisBloom's chain took 40,000 items"
        assert info(c, "chain")[b"Number of filters"] == 32
        try:
            c.execute_command("CF.ADD", "chain", "one-more")
            raise AssertionError("a full chain took an item")
        except redis.exceptions.ResponseError as e:
            assert str(e) in ("Maximum expansions reached",
                              "ERR Maximum expansions reached"), str(e)
        assert s2.stop() == 0


def main():
    from harness import run_steps
    return run_steps([never_full, copies, restart_from_log,
                      restart_from_snapshot, replay_under_other_setting, setting_off])


if __name__ == "__main__":
    sys.exit(main())
