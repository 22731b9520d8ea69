#!/usr/bin/python3
"""RS.*: reconciliation sets (issue 16) and `bloomkit diff` / `sync` with
servers.

1. The set: RS.ADD / REM / CARD / ISMEMBER / INFO / GETIDS / RESERVE,
   their errors, TYPE, a MULTI/EXEC pipeline, RESP3 reply shapes.
2. The exchange commands between two servers: RS.DIFF finds exactly the
   difference; a table too small says so; malformed or foreign estimators
   and tables get clear errors and change nothing.
3. `bloomkit diff` / `sync` between two servers (1e5 shared items, 1e4
   under sanitizers, and differences each way) and between a file and a
   server: exactly the true differences, equal sets afterwards, and far
   fewer bytes on the wire than the sets hold.
4. Persistence: snapshot + log across a kill -9, DUMP/RESTORE,
   RS.SCANDUMP/LOADCHUNK, MEMORY USAGE per item.

The functions taking (srv, r) also run against Redis with bloomkit.so
(tests/module/test_keyset.py imports them).

Run with Debian's interpreter: /usr/bin/python3 tests/server/test_keyset.py
"""
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from redis.exceptions import ResponseError  # noqa: E402

from harness import ROOT, Runner, Server, expect_error, loadchunks, scandump  # noqa: E402
import resp3  # noqa: E402

CLI = os.environ.get("BLOOMKIT_CLI") or os.path.join(ROOT, "build", "release", "cli",
                                                     "bloomkit")
SANITIZED = os.environ.get("BKS_SANITIZED") == "1"
DEFAULT_SEED = 0x9E3779B97F4A7C15     # BK_DEFAULT_SEED, also the CLI's default
STRATA_BYTES = 41000                  # the estimator's fixed wire size
TOO_SMALL = ("IBLT too small for the difference: decoding failed, ask for one with "
             "twice the cells")


def ok(reply):
    return reply in (b"OK", True, "OK")


def add_all(r, key, items, batch=1000):
    p = r.pipeline(transaction=False)
    for i in range(0, len(items), batch):
        p.execute_command("RS.ADD", key, *items[i:i + batch])
    for reply in p.execute():
        assert all(x == 1 for x in reply), "some item was already there"


def members(r, key, items):
    p = r.pipeline(transaction=False)
    for it in items:
        p.execute_command("RS.ISMEMBER", key, it)
    return p.execute()


# ---------------------------------------------------------------------------
# 1. The set
# ---------------------------------------------------------------------------

def set_semantics(srv, r):
    assert r.execute_command("RS.ADD", "s", "a", "b", "a", b"\x00bin\xff", "") == \
        [1, 1, 0, 1, 1]
    assert r.type("s") == b"bkkeyset-"
    assert r.execute_command("RS.CARD", "s") == 4
    assert r.execute_command("RS.ISMEMBER", "s", "a") == 1
    assert r.execute_command("RS.ISMEMBER", "s", b"\x00bin\xff") == 1
    assert r.execute_command("RS.ISMEMBER", "s", "") == 1
    assert r.execute_command("RS.ISMEMBER", "s", "c") == 0
    assert r.execute_command("RS.REM", "s", "a", "zz", "a") == [1, 0, 0]
    assert r.execute_command("RS.CARD", "s") == 3
    assert r.execute_command("RS.ISMEMBER", "s", "a") == 0
    # missing keys: empty sets for the counting commands, "not found" for the rest
    assert r.execute_command("RS.CARD", "none") == 0
    assert r.execute_command("RS.ISMEMBER", "none", "a") == 0
    assert r.execute_command("RS.REM", "none", "a") == [0]
    assert r.exists("none") == 0
    assert r.execute_command("RS.GETIDS", "none", "0123456789abcdef") == [None]
    for cmd in (["RS.INFO", "none"], ["RS.STRATA", "none"], ["RS.IBLT", "none", "100"]):
        expect_error(lambda: r.execute_command(*cmd), "not found")
    # INFO: the default seed is the CLI's (decimal text: it does not fit an integer)
    info = r.execute_command("RS.INFO", "s")
    assert info[0:4] == [b"Seed", str(DEFAULT_SEED).encode(), b"Number of items", 3], info
    assert info[4] == b"Size" and info[5] > 0
    assert r.execute_command("RS.INFO", "s", "items") == [3]
    expect_error(lambda: r.execute_command("RS.INFO", "s", "nope"), "Invalid information value")
    # RESERVE
    assert ok(r.execute_command("RS.RESERVE", "seeded", "SEED", "42"))
    assert r.execute_command("RS.INFO", "seeded", "SEED") == [b"42"]
    expect_error(lambda: r.execute_command("RS.RESERVE", "seeded"), "item exists")
    expect_error(lambda: r.execute_command("RS.RESERVE", "x", "SEED", "-1"),
                 "bad seed: an integer from 0 to 18446744073709551615")
    expect_error(lambda: r.execute_command("RS.RESERVE", "x", "SEEDS", "1"),
                 "Unknown argument received")
    expect_error(lambda: r.execute_command("RS.RESERVE", "x", "SEED"),
                 "wrong number of arguments for 'rs.reserve' command")
    assert r.exists("x") == 0
    # a set emptied by REM stays, with its seed
    r.execute_command("RS.ADD", "seeded", "one")
    assert r.execute_command("RS.REM", "seeded", "one") == [1]
    assert r.exists("seeded") == 1 and r.execute_command("RS.CARD", "seeded") == 0
    # WRONGTYPE both ways
    r.execute_command("BF.ADD", "bf", "a")
    wrong = "WRONGTYPE Operation against a key holding the wrong kind of value"
    for cmd in (["RS.ADD", "bf", "a"], ["RS.CARD", "bf"], ["RS.STRATA", "bf"],
                ["RS.RESERVE", "bf"], ["RS.GETIDS", "bf", "0123456789abcdef"]):
        expect_error(lambda: r.execute_command(*cmd), wrong)
    expect_error(lambda: r.execute_command("BF.ADD", "s", "a"), wrong)
    assert r.execute_command("RS.ISMEMBER", "bf", "a") == 0   # a lookup, as BF.EXISTS
    # arity
    expect_error(lambda: r.execute_command("RS.ADD", "s"),
                 "wrong number of arguments for 'rs.add' command")
    expect_error(lambda: r.execute_command("RS.DIFF", "s"),
                 "wrong number of arguments for 'rs.diff' command")


def getids(srv, r):
    r.execute_command("RS.ADD", "g", "alpha", "beta")
    table = r.execute_command("RS.IBLT", "g", "64")
    empty_strata = r.execute_command("RS.STRATA", "g")
    assert len(empty_strata) == STRATA_BYTES
    # an empty set's table against g's: RS.DIFF on an empty set lists g's ids
    r.execute_command("RS.RESERVE", "e")
    only_mine, only_theirs = r.execute_command("RS.DIFF", "e", table)
    assert only_mine == [] and len(only_theirs) == 2
    assert all(re.fullmatch(rb"[0-9a-f]{16}", i) for i in only_theirs), only_theirs
    got = r.execute_command("RS.GETIDS", "g", *only_theirs, "0000000000000000")
    assert sorted(got[:2]) == [b"alpha", b"beta"] and got[2] is None
    # upper-case hex is accepted too
    assert r.execute_command("RS.GETIDS", "g", only_theirs[0].upper()) == [got[0]]
    for bad in ("123", "0123456789abcdeg", "0x23456789abcdef", "0123456789abcdef0"):
        expect_error(lambda: r.execute_command("RS.GETIDS", "g", bad),
                     "bad id: ids are 16 hexadecimal digits")


def transaction_pipeline(srv, r):
    p = r.pipeline(transaction=True)
    p.execute_command("RS.ADD", "t", "a", "b")
    p.execute_command("RS.ADD", "t", "b", "c")
    p.execute_command("RS.REM", "t", "a")
    p.execute_command("RS.CARD", "t")
    p.execute_command("RS.ISMEMBER", "t", "c")
    p.execute_command("RS.INFO", "t", "ITEMS")
    assert p.execute() == [[1, 1], [0, 1], [1], 2, 1, [2]]


def resp3_shapes(srv, r):
    r.execute_command("RS.ADD", "r3", "a", "b", "c")
    r.execute_command("RS.ADD", "r3b", "a", "d")
    c = resp3.Conn(srv.port)
    if srv.password:
        c.call("AUTH", srv.password)
    hello = c.call("HELLO", "3")
    assert not isinstance(hello, resp3.Err), hello
    assert c.call("RS.ADD", "r3", "a", "z") == [False, True]
    assert c.call("RS.REM", "r3", "z", "z") == [True, False]
    assert c.call("RS.ISMEMBER", "r3", "a") is True
    assert c.call("RS.ISMEMBER", "r3", "q") is False
    card = c.call("RS.CARD", "r3")
    assert card == 3 and not isinstance(card, bool)
    info = c.call("RS.INFO", "r3")
    assert isinstance(info, resp3.Map), info
    d = info.as_dict()
    assert d["Number of items"] == 3 and d["Seed"] == str(DEFAULT_SEED).encode(), d
    assert isinstance(c.call("RS.INFO", "r3", "SIZE"), resp3.Map)
    est = c.call("RS.ESTIMATE", "r3", c.call("RS.STRATA", "r3b"))
    assert isinstance(est, int) and not isinstance(est, bool) and est == 3, est
    diff = c.call("RS.DIFF", "r3", c.call("RS.IBLT", "r3b", "64"))
    assert isinstance(diff, list) and len(diff) == 2, diff
    assert sorted(diff[0]) == [b"b", b"c"] and len(diff[1]) == 1
    assert c.call("RS.GETIDS", "r3b", diff[1][0], "0000000000000000") == [b"d", None]
    c.close()


# ---------------------------------------------------------------------------
# 2. The exchange commands
# ---------------------------------------------------------------------------

def exchange_commands(srv, r):
    shared = ["shared:%d" % i for i in range(3000)]
    only_a = ["a-only:%d" % i for i in range(40)]
    only_b = ["b-only:%d" % i for i in range(25)]
    add_all(r, "A", shared + only_a)
    add_all(r, "B", shared + only_b)
    est = r.execute_command("RS.ESTIMATE", "B", r.execute_command("RS.STRATA", "A"))
    # the strata estimate of 65: within a factor 2 (its error at this size)
    assert 32 <= est <= 130, est
    cells = 2 * est + 32   # bk_iblt_cells_for
    table = r.execute_command("RS.IBLT", "B", cells)
    assert len(table) == 32 + 16 * ((cells + 3) // 4 * 4) + 8, len(table)
    mine, theirs = r.execute_command("RS.DIFF", "A", table)
    assert sorted(x.decode() for x in mine) == sorted(only_a)
    got = r.execute_command("RS.GETIDS", "B", *theirs)
    assert sorted(x.decode() for x in got) == sorted(only_b)
    # a table far too small: the error that asks for twice the cells
    small = r.execute_command("RS.IBLT", "B", "8")
    expect_error(lambda: r.execute_command("RS.DIFF", "A", small), TOO_SMALL)
    # equal sets: nothing either way
    add_all(r, "A2", shared)
    add_all(r, "B2", shared)
    assert r.execute_command("RS.ESTIMATE", "A2", r.execute_command("RS.STRATA", "B2")) == 0
    assert r.execute_command("RS.DIFF", "A2", r.execute_command("RS.IBLT", "B2", 32)) == [[], []]


def malformed_payloads(srv, r):
    add_all(r, "m", ["m:%d" % i for i in range(500)])
    before = (r.execute_command("RS.CARD", "m"), r.dump("m"))
    strata = r.execute_command("RS.STRATA", "m")
    table = r.execute_command("RS.IBLT", "m", "100")
    flipped_s = strata[:100] + bytes([strata[100] ^ 1]) + strata[101:]
    flipped_t = table[:60] + bytes([table[60] ^ 1]) + table[61:]
    cases = [
        ("RS.ESTIMATE", b"", "invalid strata estimator: data is truncated"),
        ("RS.ESTIMATE", b"junk" * 20, "invalid strata estimator: not a bloomkit file (bad magic)"),
        ("RS.ESTIMATE", strata[:-1], "invalid strata estimator: data is truncated"),
        ("RS.ESTIMATE", strata + b"x",
         "invalid strata estimator: inconsistent or impossible parameters: data is corrupt"),
        ("RS.ESTIMATE", flipped_s, "invalid strata estimator: checksum mismatch: data is corrupt"),
        ("RS.ESTIMATE", table, "invalid strata estimator: not a bloomkit file (bad magic)"),
        ("RS.DIFF", b"", "invalid IBLT: data is truncated"),
        ("RS.DIFF", strata, "invalid IBLT: not a bloomkit file (bad magic)"),
        ("RS.DIFF", table[:-8], "invalid IBLT: data is truncated"),
        ("RS.DIFF", flipped_t, "invalid IBLT: checksum mismatch: data is corrupt"),
    ]
    for cmd, payload, text in cases:
        expect_error(lambda: r.execute_command(cmd, "m", payload), text)
    # a foreign seed
    r.execute_command("RS.RESERVE", "other", "SEED", "7")
    r.execute_command("RS.ADD", "other", "x")
    expect_error(lambda: r.execute_command("RS.ESTIMATE", "m",
                                           r.execute_command("RS.STRATA", "other")),
                 "seed mismatch: the strata estimator was built with seed 7, this set has "
                 "seed %d" % DEFAULT_SEED)
    expect_error(lambda: r.execute_command("RS.DIFF", "m",
                                           r.execute_command("RS.IBLT", "other", "50")),
                 "seed mismatch: the IBLT was built with seed 7, this set has seed %d"
                 % DEFAULT_SEED)
    # absurd cell counts
    for cells in ("0", "-1", "abc", "1.5", str((1 << 25) + 1), str(1 << 40)):
        expect_error(lambda: r.execute_command("RS.IBLT", "m", cells),
                     "bad cell count: an integer from 1 to 33554432")
    # within the limit of cells, but over what maxmemory leaves (2 x 512 MiB)
    limit = r.config_get("maxmemory")["maxmemory"]
    r.config_set("maxmemory", str(64 << 20))
    try:
        expect_error(lambda: r.execute_command("RS.IBLT", "m", str(1 << 25)),
                     "filter would exceed maxmemory")
    finally:
        r.config_set("maxmemory", limit)
    assert (r.execute_command("RS.CARD", "m"), r.dump("m")) == before


# ---------------------------------------------------------------------------
# 3. bloomkit diff / sync
# ---------------------------------------------------------------------------

def run_cli(*args):
    return subprocess.run([CLI] + list(args), capture_output=True, timeout=600)


def wire_bytes(stderr):
    """(sent + received) per server from the CLI's summary."""
    return [int(a) + int(b) for a, b in
            re.findall(rb": (\d+) bytes sent, (\d+) received", stderr)]


def diff_lines(out):
    mine = sorted(l[2:].decode() for l in out.splitlines() if l.startswith(b"< "))
    theirs = sorted(l[2:].decode() for l in out.splitlines() if l.startswith(b"> "))
    assert len(mine) + len(theirs) == len(out.splitlines()), out[:200]
    return mine, theirs


def cli_two_servers():
    n = 10000 if SANITIZED else 100000
    rng = random.Random(16)
    shared = ["url:%d:%08x" % (i, rng.getrandbits(32)) for i in range(n)]
    only_a = ["a:%d:%08x" % (i, rng.getrandbits(32)) for i in range(300)]
    only_b = ["b:%d:%08x" % (i, rng.getrandbits(32)) for i in range(200)]
    with Server() as sa, Server() as sb:
        ra, rb = sa.client(), sb.client()
        add_all(ra, "set", shared + only_a)
        add_all(rb, "set", shared + only_b)
        A, B = "127.0.0.1:%d/set" % sa.port, "127.0.0.1:%d/set" % sb.port
        p = run_cli("diff", A, B)
        assert p.returncode == 1, (p.returncode, p.stderr)
        assert diff_lines(p.stdout) == (sorted(only_a), sorted(only_b))
        head = ("bloomkit: diff: 300 keys only in %s, 200 only in %s; exchanged " % (A, B))
        assert p.stderr.decode().startswith(head), p.stderr
        set_bytes = sum(len(x) for x in shared + only_a)
        wire = wire_bytes(p.stderr)
        assert len(wire) == 2, p.stderr
        diff_bytes = sum(len(x) for x in only_a + only_b)
        # each server: the estimator (41 KB), IBLTs of ~2 x 500 cells of 16
        # bytes, ids and keys: ~80 KB, against 1.8 MB (190 KB sanitized)
        # of items in each set
        for w in wire:
            assert w < STRATA_BYTES + 2 * (2 * 2 * 500 + 32) * 16 + 20 * diff_bytes, w
            assert w < set_bytes / (2 if SANITIZED else 10), (w, set_bytes)
        print("    diff of %d + %d items, 300/200 apart: wire %s bytes, sets %d bytes"
              % (n + 300, n + 200, wire, set_bytes))
        p = run_cli("sync", A, B)
        assert p.returncode == 0, p.stderr
        assert ra.execute_command("RS.CARD", "set") == n + 500
        assert rb.execute_command("RS.CARD", "set") == n + 500
        assert members(ra, "set", only_b) == [1] * 200
        assert members(rb, "set", only_a) == [1] * 300
        p = run_cli("diff", A, B)
        assert p.returncode == 0 and p.stdout == b"", p.stderr
        # a sync into a missing key copies the whole set (seed included)
        p = run_cli("sync", A, "127.0.0.1:%d/copy" % sb.port, "-q")
        assert p.returncode == 0 and p.stderr == b"", p.stderr
        assert rb.execute_command("RS.CARD", "copy") == n + 500
        assert rb.execute_command("RS.INFO", "copy", "SEED") == [str(DEFAULT_SEED).encode()]


def cli_file_and_server():
    with Server() as srv, tempfile.TemporaryDirectory() as d:
        r = srv.client()
        add_all(r, "k", ["k%d" % i for i in range(2000)] + ["srv-only-1", "srv-only-2"])
        path = os.path.join(d, "keys.txt")
        with open(path, "w") as f:
            f.write("".join("k%d\n" % i for i in range(2000)) + "file-only\nk5\n")
        S = "127.0.0.1:%d/k" % srv.port
        p = run_cli("diff", path, S)
        assert p.returncode == 1, p.stderr
        assert diff_lines(p.stdout) == (["file-only"], ["srv-only-1", "srv-only-2"]), p.stdout
        assert len(wire_bytes(p.stderr)) == 1
        p = run_cli("diff", S, path)
        assert diff_lines(p.stdout) == (["srv-only-1", "srv-only-2"], ["file-only"])
        p = run_cli("sync", path, S)
        assert p.returncode == 0, p.stderr
        assert r.execute_command("RS.ISMEMBER", "k", "file-only") == 1
        with open(path) as f:
            lines = f.read().splitlines()
        assert sorted(lines[-2:]) == ["srv-only-1", "srv-only-2"], lines[-3:]
        p = run_cli("diff", path, S)
        assert p.returncode == 0 and p.stdout == b"", (p.stdout, p.stderr)
        # --seed must agree with the server's
        p = run_cli("diff", path, S, "--seed", "5")
        assert p.returncode == 2
        assert b"has seed %d but --seed is 5" % DEFAULT_SEED in p.stderr, p.stderr
        # a key of another type, a server that is not there, a bad spelling
        r.execute_command("BF.ADD", "bf", "x")
        p = run_cli("diff", path, "127.0.0.1:%d/bf" % srv.port)
        assert p.returncode == 2 and b"WRONGTYPE" in p.stderr, p.stderr
        p = run_cli("diff", path, "127.0.0.1:1/k")
        assert p.returncode == 2 and b"cannot connect" in p.stderr, p.stderr
        # ./HOST:PORT/KEY is a file path
        p = run_cli("diff", path, "./127.0.0.1:1/k")
        assert p.returncode == 2 and b"127.0.0.1:1/k" in p.stderr and \
            b"cannot connect" not in p.stderr, p.stderr


# ---------------------------------------------------------------------------
# 4. Persistence
# ---------------------------------------------------------------------------

def dump_restore(srv, r):
    items = ["d%d" % i for i in range(3000)]
    add_all(r, "dr", items)
    r.execute_command("RS.REM", "dr", *items[:1000])   # removed records in the arena
    payload = r.dump("dr")
    assert ok(r.restore("dr2", 0, payload))
    assert r.type("dr2") == b"bkkeyset-"
    assert r.execute_command("RS.CARD", "dr2") == 2000
    assert members(r, "dr2", items[995:1005]) == [0] * 5 + [1] * 5
    assert r.execute_command("RS.DIFF", "dr2", r.execute_command("RS.IBLT", "dr", 64)) == [[], []]
    # the same through RS.SCANDUMP / RS.LOADCHUNK
    chunks = scandump(r, "RS", "dr")
    assert all(ok(reply) for reply in loadchunks(r, "RS", "dr3", chunks))
    assert r.execute_command("RS.CARD", "dr3") == 2000
    # a body damaged inside a well-formed container: its own checksum refuses it
    whole = b"".join(data for _, data in chunks)
    bad = whole[:len(whole) // 2] + bytes([whole[len(whole) // 2] ^ 1]) + whole[len(whole) // 2 + 1:]
    expect_error(lambda: r.execute_command("RS.LOADCHUNK", "dr5", len(bad), bad),
                 "invalid chunk: checksum mismatch: data is corrupt")
    assert r.exists("dr5") == 0
    # a damaged payload is refused and nothing is created
    bad = bytearray(payload)
    bad[len(bad) // 2] ^= 0x40
    try:
        r.restore("dr4", 0, bytes(bad))
        raise AssertionError("a damaged payload was restored")
    except ResponseError:
        pass
    assert r.exists("dr4") == 0


def removals_compact(srv, r):
    items = ["c%05d" % i for i in range(6000)]
    add_all(r, "c", items)
    full = r.memory_usage("c")
    dump_full = r.dump("c")
    # removing 5000 of 6000 compacts the arena (removed bytes > half of it)
    assert r.execute_command("RS.REM", "c", *items[:5000]) == [1] * 5000
    assert r.execute_command("RS.CARD", "c") == 1000
    assert members(r, "c", items[4990:5010]) == [0] * 10 + [1] * 10
    assert r.memory_usage("c") < full
    r.execute_command("RS.RESERVE", "none")
    mine, theirs = r.execute_command("RS.DIFF", "c", r.execute_command("RS.IBLT", "none", 3000))
    assert sorted(x.decode() for x in mine) == items[5000:] and theirs == []
    # the remaining set encodes the same after a round trip, and re-adding
    # the removed items gives back the full set
    payload = r.dump("c")
    assert ok(r.restore("c2", 0, payload)) and r.dump("c2") == payload
    assert r.execute_command("RS.ADD", "c", *items[:5000]) == [1] * 5000
    assert r.execute_command("RS.CARD", "c") == 6000
    assert ok(r.restore("c3", 0, dump_full))
    assert r.execute_command("RS.DIFF", "c", r.execute_command("RS.IBLT", "c3", 64)) == [[], []]


def memory_per_item(srv, r):
    n = 20000
    items = ["item-of-twenty-b%04d" % i for i in range(n)]   # 20 bytes each
    add_all(r, "mem", items)
    per = r.memory_usage("mem") / n
    # 16-byte slots at a load of 3/8 .. 3/4 (21 .. 43 bytes), a 4-byte length
    # and the item (24), the arena's doubling slack (up to 2x of 24)
    assert 21 + 24 <= per <= 43 + 48 + 1, per
    print("    MEMORY USAGE: %.1f bytes per 20-byte item at %d items" % (per, n))


def restart_keeps_sets():
    with Server("--appendfsync", "always") as srv:
        r = srv.client()
        add_all(r, "p", ["p%d" % i for i in range(5000)])
        r.execute_command("RS.RESERVE", "q", "SEED", "99")
        r.execute_command("RS.ADD", "q", "x", "y")
        assert ok(r.execute_command("SAVE"))
        # after the snapshot: only in the log
        r.execute_command("RS.ADD", "p", "late-1", "late-2")
        r.execute_command("RS.REM", "p", "p0", "p1")
        r.execute_command("RS.ADD", "r", "new-key")
        srv.kill()
        srv.restart()
        r = srv.client()
        assert r.execute_command("RS.CARD", "p") == 5000
        assert members(r, "p", ["p0", "p1", "p2", "late-1", "late-2"]) == [0, 0, 1, 1, 1]
        assert r.execute_command("RS.INFO", "q", "SEED") == [b"99"]
        assert r.execute_command("RS.CARD", "r") == 1
        assert srv.stop() == 0
        srv.start()
        r = srv.client()
        assert r.execute_command("RS.CARD", "p") == 5000


def concurrent_clients():
    """Writers and the exchange's readers on one key from several
    connections at once (the server's worker threads, per-key locks)."""
    import threading
    per = 1000 if SANITIZED else 5000
    with Server(threads=4) as srv:
        errors = []

        def writer(w):
            try:
                r = srv.client()
                for i in range(0, per, 250):
                    r.execute_command("RS.ADD", "cc", *["w%d:%d" % (w, j)
                                                        for j in range(i, i + 250)])
                r.execute_command("RS.REM", "cc", *["w%d:%d" % (w, j) for j in range(0, per, 2)])
            except Exception as e:  # reported below
                errors.append(e)

        def reader():
            try:
                r = srv.client()
                for _ in range(20):
                    if r.exists("cc"):
                        assert len(r.execute_command("RS.STRATA", "cc")) == STRATA_BYTES
                        r.execute_command("RS.IBLT", "cc", 100)
            except Exception as e:
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
        threads += [threading.Thread(target=reader) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        r = srv.client()
        assert r.execute_command("RS.CARD", "cc") == 3 * per // 2
        left = ["w%d:%d" % (w, j) for w in range(3) for j in range(1, per, 2)]
        r.execute_command("RS.RESERVE", "ref")
        add_all(r, "ref", left)
        assert r.execute_command("RS.DIFF", "cc", r.execute_command("RS.IBLT", "ref", 64)) == [[], []]


SET_TESTS = [set_semantics, getids, transaction_pipeline, resp3_shapes, exchange_commands,
             malformed_payloads, dump_restore, removals_compact, memory_per_item]


def run_set_tests(run, make_server):
    run.check_each(SET_TESTS, make_server)


def main():
    run = Runner("server keyset")
    run_set_tests(run, Server)
    run.check("restart (snapshot + log)", restart_keeps_sets)
    run.check("concurrent writers and readers", concurrent_clients)
    run.check("bloomkit diff/sync between two servers", cli_two_servers)
    run.check("bloomkit diff/sync between a file and a server", cli_file_and_server)
    run.finish()


if __name__ == "__main__":
    main()
