#!/usr/bin/python3
"""SF.* (issue 16): static filters and maps made by the CLI, pushed into a
server key, answering as the CLI answers on the file.

A static filter (`bloomkit create --type static`) and a static map
(`bloomkit build-map`) of 3000 keys are pushed with `bloomkit push`; for
3000 members and 3000 non-members SF.EXISTS / SF.MEXISTS must answer what
`bloomkit check` answers on the file, and SF.GET / SF.MGET what `bloomkit
get` answers (the same library on the same bytes: equal, not "about"
equal). The same holds after a restart from the log (SIGKILL), from a
snapshot, after DUMP/RESTORE, after SCANDUMP/LOADCHUNK (one chunk and many),
after `bloomkit pull` (byte-identical file) and `bloomkit copy`. Errors: the
wrong kind, a corrupt chunk (the old key kept), SF.GET on a filter, the
builds' argument errors. RESP2 and RESP3 reply types.

The functions taking (srv, r) also run inside Redis with bloomkit.so
(tests/module/test_static.py imports them).

Run with Debian's interpreter: /usr/bin/python3 tests/server/test_static.py
(BLOOMKIT_CLI: the bloomkit program, else build/release/cli/bloomkit).
Prints "N passed, M failed"; exits non-zero on any failure.
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import redis  # noqa: E402
from redis.exceptions import ResponseError  # noqa: E402

from harness import expect_error  # noqa: E402

import resp3  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLI = os.environ.get("BLOOMKIT_CLI") or os.path.join(ROOT, "build", "release", "cli", "bloomkit")

N = 3000
MEMBERS = ["m:%d" % i for i in range(N)]
OTHERS = ["n:%d" % i for i in range(N)]
PROBES = MEMBERS + OTHERS
VALUES = {k: (i * 7919) % 5000 for i, k in enumerate(MEMBERS)}

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NOT_MAP = "not a static map: SF.GET needs a map (SF.BUILDMAP, bloomkit build-map)"


def cli(*args, ok=(0,)):
    p = subprocess.run([CLI] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    assert p.returncode in ok, "bloomkit %s: exit %d\n%s" % (
        " ".join(map(str, args)), p.returncode, p.stderr.decode())
    return p.stdout.decode()


class Files:
    """The CLI's files and its own answers on them."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="bks-static-")
        self.keys = os.path.join(self.dir, "keys.txt")
        self.pairs = os.path.join(self.dir, "pairs.txt")
        self.probes = os.path.join(self.dir, "probes.txt")
        self.filter = os.path.join(self.dir, "f.bkf")
        self.map = os.path.join(self.dir, "m.bkf")
        with open(self.keys, "w") as f:
            f.write("".join(k + "\n" for k in MEMBERS))
        with open(self.pairs, "w") as f:
            f.write("".join("%s\t%d\n" % (k, VALUES[k]) for k in MEMBERS))
        with open(self.probes, "w") as f:
            f.write("".join(k + "\n" for k in PROBES))
        cli("create", "--type", "static", self.filter, self.keys)
        cli("build-map", "--quiet", self.map, self.pairs)
        # exit 1: no key matched; never here (members always match)
        found = set(cli("check", self.filter, self.probes).split())
        self.exists_f = [1 if k in found else 0 for k in PROBES]
        got = {}
        for line in cli("get", self.map, self.probes).splitlines():
            k, v = line.rsplit("\t", 1)
            got[k] = int(v)
        self.get_m = [got.get(k) for k in PROBES]
        self.exists_m = [0 if v is None else 1 for v in self.get_m]
        # the CLI itself is right: members found, with their values
        assert self.exists_f[:N] == [1] * N
        assert self.get_m[:N] == [VALUES[k] for k in MEMBERS]

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


FILES = None


def files():
    global FILES
    if FILES is None:
        FILES = Files()
    return FILES


def push(srv, path, key, *extra):
    out = cli("push", path, "127.0.0.1:%d" % srv.port, key, *extra)
    assert out.startswith("pushed "), out


def answers_equal(r, fkey="f", mkey="m"):
    """SF.* on the pushed keys answer what the CLI answers on the files."""
    fs = files()
    assert r.execute_command("SF.MEXISTS", fkey, *PROBES) == fs.exists_f
    assert r.execute_command("SF.MEXISTS", mkey, *PROBES) == fs.exists_m
    assert r.execute_command("SF.MGET", mkey, *PROBES) == fs.get_m
    # single-item commands on a sample, in a transaction (python-redis's
    # default pipeline wraps MULTI/EXEC)
    sample = list(range(0, 2 * N, 97))
    p = r.pipeline(transaction=True)
    for i in sample:
        p.execute_command("SF.EXISTS", fkey, PROBES[i])
        p.execute_command("SF.EXISTS", mkey, PROBES[i])
        p.execute_command("SF.GET", mkey, PROBES[i])
    got = p.execute()
    want = []
    for i in sample:
        want += [fs.exists_f[i], fs.exists_m[i], fs.get_m[i]]
    assert got == want


def load(srv, r):
    fs = files()
    push(srv, fs.filter, "f", "--chunk-size", "1000")   # many chunks
    push(srv, fs.map, "m")                              # one chunk


# -- the tests ------------------------------------------------------------

def pushed_keys_answer_like_the_cli(srv, r):
    load(srv, r)
    answers_equal(r)
    assert r.type("f") == b"bkstatic-" and r.type("m") == b"bkstatic-"
    # the non-member rates are the files' 2^-8 and 2^-7: at most 3 sigma
    # above over 3000 non-members
    for got, p in ((sum(files().exists_f[N:]), 2 ** -8), (sum(files().exists_m[N:]), 2 ** -7)):
        assert got <= N * p + 3 * (N * p * (1 - p)) ** 0.5, got


def info_fields(srv, r):
    f = r.execute_command("SF.INFO", "f")
    f = dict(zip(f[::2], f[1::2]))
    assert f[b"Type"] == b"static filter", f
    assert f[b"Number of items"] == N
    assert float(f[b"Error rate"]) == 2 ** -8
    assert b"Value bits" not in f
    size = f[b"Size"]
    # a fuse filter: about 1.13 x 8 bits a key (more for 3000 keys), never 2x
    assert 8 * N / 8 < size < 2 * 8 * N / 8 + 4096, size
    assert 8.0 < float(f[b"Bits per item"]) < 16.0
    m = r.execute_command("SF.INFO", "m")
    m = dict(zip(m[::2], m[1::2]))
    assert m[b"Type"] == b"static map"
    assert m[b"Number of items"] == N
    assert m[b"Value bits"] == 13 and m[b"Check bits"] == 7   # 4999 < 2^13; 1% -> 7
    assert float(m[b"Error rate"]) == 2 ** -7
    assert r.execute_command("SF.INFO", "m", "VALUEBITS") == [13]
    assert r.execute_command("SF.INFO", "f", "items") == [N]
    expect_error(lambda: r.execute_command("SF.INFO", "f", "VALUEBITS"), "Invalid information value")
    expect_error(lambda: r.execute_command("SF.INFO", "nokey"), "not found")
    expect_error(lambda: r.execute_command("SF.INFO", "f", "a", "b"),
                 "wrong number of arguments for 'sf.info' command")
    # MEMORY USAGE counts the structure (and the key's bookkeeping)
    assert r.memory_usage("f") >= size


def resp_types(srv, r):
    c = resp3.Conn(srv.port)
    try:
        # RESP2: integers and nil
        x = c.call("SF.EXISTS", "f", MEMBERS[0])
        assert x == 1 and type(x) is int
        assert c.call("SF.MEXISTS", "m", MEMBERS[1], "zz-not") in ([1, 0], [1, 1])
        assert c.call("SF.GET", "m", MEMBERS[2]) == VALUES[MEMBERS[2]]
        assert c.call("SF.GET", "nokey", "x") == resp3.Null("$")
        assert c.call("SF.EXISTS", "nokey", "x") == 0
        info = c.call("SF.INFO", "m")
        assert isinstance(info, list) and len(info) == 14
        # RESP3: booleans, maps, null
        c.call("HELLO", "3")
        assert c.call("SF.EXISTS", "f", MEMBERS[0]) is True
        assert c.call("SF.EXISTS", "nokey", "x") is False
        got = c.call("SF.MEXISTS", "f", MEMBERS[0], MEMBERS[1])
        assert got == [True, True] and all(v is True for v in got)
        got = c.call("SF.MGET", "m", MEMBERS[3], "nokey-item")
        assert got[0] == VALUES[MEMBERS[3]]
        assert got[1] is None or isinstance(got[1], (int, resp3.Null))
        info = c.call("SF.INFO", "m")
        assert isinstance(info, resp3.Map) and info.as_dict()["Type"] == "static map"
        one = c.call("SF.INFO", "f", "TYPE")
        assert isinstance(one, resp3.Map) and one.as_dict() == {"Type": "static filter"}
    finally:
        c.close()


def wrong_kinds(srv, r):
    r.execute_command("BF.ADD", "bf", "x")
    expect_error(lambda: r.execute_command("BF.ADD", "f", "x"), WRONGTYPE)
    expect_error(lambda: r.execute_command("CF.ADD", "m", "x"), WRONGTYPE)
    expect_error(lambda: r.execute_command("BF.INFO", "f"), WRONGTYPE)
    assert r.execute_command("BF.EXISTS", "f", MEMBERS[0]) == 0
    assert r.execute_command("SF.EXISTS", "bf", "x") == 0
    assert r.execute_command("SF.MEXISTS", "bf", "x", "y") == [0, 0]
    expect_error(lambda: r.execute_command("SF.GET", "bf", "x"), WRONGTYPE)
    expect_error(lambda: r.execute_command("SF.MGET", "bf", "x"), WRONGTYPE)
    expect_error(lambda: r.execute_command("SF.INFO", "bf"), WRONGTYPE)
    expect_error(lambda: r.execute_command("SF.SCANDUMP", "bf", 0), WRONGTYPE)
    # SF.GET on a static filter (not a map)
    expect_error(lambda: r.execute_command("SF.GET", "f", MEMBERS[0]), NOT_MAP)
    expect_error(lambda: r.execute_command("SF.MGET", "f", MEMBERS[0]), NOT_MAP)
    # a Bloom filter's dump is not a static one, and the key stays
    it, data = r.execute_command("BF.SCANDUMP", "bf", 0)
    expect_error(lambda: r.execute_command("SF.LOADCHUNK", "m", it, data),
                 "invalid chunk: not a static filter or map dump")
    answers_equal(r)
    expect_error(lambda: r.execute_command("SF.LOADCHUNK", "bf", it, data), WRONGTYPE)
    # a static dump is no Bloom filter's
    it, data = r.execute_command("SF.SCANDUMP", "m", 0)
    expect_error(lambda: r.execute_command("BF.LOADCHUNK", "bf2", it, data),
                 "invalid chunk: not a Bloom filter dump")
    assert r.exists("bf2") == 0


def whole_dump(r, key):
    out, it = b"", 0
    while True:
        it, data = r.execute_command("SF.SCANDUMP", key, it)
        if it == 0:
            assert data == b""
            return out
        out += data


def scandump_loadchunk(srv, r):
    for key in ("f", "m"):
        dump = whole_dump(r, key)
        # one chunk
        assert r.execute_command("SF.LOADCHUNK", key + "1", len(dump), dump) in (b"OK", True)
        # many: 700 bytes each, the iterator the end offset
        for at in range(0, len(dump), 700):
            piece = dump[at:at + 700]
            assert r.execute_command("SF.LOADCHUNK", key + "2", at + len(piece), piece) in (b"OK", True)
        assert whole_dump(r, key + "1") == dump and whole_dump(r, key + "2") == dump
    answers_equal(r, "f1", "m1")
    answers_equal(r, "f2", "m2")
    for k in ("f1", "m1", "f2", "m2"):
        r.delete(k)


def corrupt_chunks(srv, r):
    dump = whole_dump(r, "m")
    # a flipped byte inside the filter image: its checksum fails, the key stays
    bad = bytearray(dump)
    bad[len(bad) // 2] ^= 0x40
    try:
        r.execute_command("SF.LOADCHUNK", "m", len(bad), bytes(bad))
        raise AssertionError("a corrupt image was accepted")
    except ResponseError as e:
        assert str(e).startswith("invalid chunk: "), str(e)
    # a flipped header byte
    bad = bytearray(dump)
    bad[9] ^= 1
    try:
        r.execute_command("SF.LOADCHUNK", "m", len(bad), bytes(bad))
        raise AssertionError("a corrupt header was accepted")
    except ResponseError as e:
        assert str(e).startswith("invalid chunk: "), str(e)
    # the first of several chunks is checked before anything is replaced
    expect_error(lambda: r.execute_command("SF.LOADCHUNK", "m", 10, dump[:10]),
                 "invalid chunk: shorter than the dump header")
    answers_equal(r)
    # a raw file image is not a chunk (bloomkit push wraps it)
    with open(files().map, "rb") as f:
        raw = f.read()
    try:
        r.execute_command("SF.LOADCHUNK", "m", len(raw), raw)
        raise AssertionError("a raw file image was accepted")
    except ResponseError as e:
        assert str(e).startswith("invalid chunk: "), str(e)
    answers_equal(r)
    # a later chunk that does not fit drops the load (no half-built key)
    assert r.execute_command("SF.LOADCHUNK", "half", 100, dump[:100]) in (b"OK", True)
    # a load in progress: hidden by bloomkit-server; Redis shows module
    # keys, so there it is the "bkloading" type
    import harness
    if harness.MODULE:
        assert r.type("half") == b"bkloading"
    else:
        assert r.exists("half") == 0
    bad = bytearray(dump[100:])
    bad[-3] ^= 0xff
    try:
        r.execute_command("SF.LOADCHUNK", "half", len(dump), bytes(bad))
        raise AssertionError("a corrupt last chunk was accepted")
    except ResponseError:
        pass
    assert r.exists("half") == 0


def pull_round_trip(srv, r):
    fs = files()
    for key, path in (("f", fs.filter), ("m", fs.map)):
        out = os.path.join(fs.dir, "pulled-" + key)
        cli("pull", "127.0.0.1:%d" % srv.port, key, out)
        with open(out, "rb") as a, open(path, "rb") as b:
            assert a.read() == b.read(), key
        # an existing file is refused without --force
        cli("pull", "127.0.0.1:%d" % srv.port, key, out, ok=(2,))
        cli("pull", "127.0.0.1:%d" % srv.port, key, out, "--force")
        os.unlink(out)
    cli("pull", "127.0.0.1:%d" % srv.port, "nokey", os.path.join(fs.dir, "x"), ok=(2,))
    # push refuses an existing key without --replace, and a non-static file
    cli("push", fs.map, "127.0.0.1:%d" % srv.port, "m", ok=(2,))
    push(srv, fs.map, "m", "--replace")
    answers_equal(r)
    bf = os.path.join(fs.dir, "bloom.bkf")
    cli("create", bf, "--capacity", "100", "--error", "0.01")
    cli("push", bf, "127.0.0.1:%d" % srv.port, "b", ok=(2,))
    assert r.exists("b") == 0


def push_replace_is_atomic(srv, r):
    """A push of many chunks goes into a staging key renamed over KEY at the
    end: a reader of the live key sees the old filter, then the new one,
    never the half-loaded value (whose lookups answer 0), and no staging
    key is left. Only a static key is replaced; hash-tagged names keep
    their slot."""
    import threading
    fs = files()
    port = "127.0.0.1:%d" % srv.port
    push(srv, fs.filter, "live", "--chunk-size", "1000")
    seen = {"zeros": 0, "errors": 0, "asks": 0}
    stop = threading.Event()

    def reader():
        c = srv.client()
        while not stop.is_set():
            try:
                got = c.execute_command("SF.MEXISTS", "live", *MEMBERS[:64])
                seen["zeros"] += sum(1 for x in got if not x)
            except redis.exceptions.RedisError:
                seen["errors"] += 1
            seen["asks"] += 1

    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(3):
            push(srv, fs.filter, "live", "--replace", "--chunk-size", "64")
    finally:
        stop.set()
        t.join()
    assert seen["asks"] > 0 and seen["zeros"] == 0 and seen["errors"] == 0, seen
    assert [k for k in r.scan_iter("*bloomkit-push*")] == [], "a staging key was left"
    assert r.execute_command("SF.MEXISTS", "live", *PROBES) == fs.exists_f
    # a key of another kind is not replaced
    r.execute_command("BF.ADD", "bfkey", "x")
    p = subprocess.run([CLI, "push", fs.filter, port, "bfkey", "--replace",
                        "--chunk-size", "1000"], stderr=subprocess.PIPE)
    assert p.returncode == 2 and b"WRONGTYPE" in p.stderr, p.stderr
    assert r.type("bfkey") != b"bkstatic-" and r.execute_command("BF.EXISTS", "bfkey", "x") == 1
    # without --replace a key created meanwhile is not overwritten: the
    # rename is RENAMENX (here: the key exists from the start)
    cli("push", fs.filter, port, "live", "--chunk-size", "1000", ok=(2,))
    # names with a hash tag, and with a '}' and no tag (loaded in place)
    for key in ("{tag}:blocklist", "a}b"):
        push(srv, fs.filter, key, "--chunk-size", "1000")
        push(srv, fs.filter, key, "--replace", "--chunk-size", "1000")
        assert r.execute_command("SF.MEXISTS", key, *PROBES) == fs.exists_f, key
    assert [k for k in r.scan_iter("*bloomkit-push*")] == []
    r.delete("live", "bfkey", "{tag}:blocklist", "a}b")


def dump_restore(srv, r):
    for key in ("f", "m"):
        payload = r.dump(key)
        assert r.restore(key + "-r", 0, payload) in (b"OK", True)
        assert r.type(key + "-r") == b"bkstatic-"
    answers_equal(r, "f-r", "m-r")
    r.delete("f-r", "m-r")


def builds(srv, r):
    assert r.execute_command("SF.BUILD", "b1", "ITEMS", "a", "b", "c", "a") in (b"OK", True)
    assert r.execute_command("SF.MEXISTS", "b1", "a", "b", "c") == [1, 1, 1]
    info = r.execute_command("SF.INFO", "b1", "ITEMS")
    assert info == [3]
    # the fewest fingerprint bits whose 2^-w is at most ERROR: 0.001 -> 12,
    # 0.0001 -> 16
    assert r.execute_command("SF.BUILD", "b2", "ERROR", "0.001", "ITEMS", "x") in (b"OK", True)
    assert float(r.execute_command("SF.INFO", "b2", "ERROR")[0]) == 2 ** -12
    assert r.execute_command("SF.BUILD", "b3", "ERROR", "0.0001", "ITEMS", "x") in (b"OK", True)
    assert float(r.execute_command("SF.INFO", "b3", "ERROR")[0]) == 2 ** -16
    assert r.execute_command("SF.BUILDMAP", "bm", "ITEMS", "a", "1", "b", "200", "a", "1") in (b"OK", True)
    assert r.execute_command("SF.MGET", "bm", "a", "b") == [1, 200]
    assert r.execute_command("SF.INFO", "bm", "VALUEBITS") == [8]
    assert r.execute_command("SF.INFO", "bm", "CHECKBITS") == [7]
    expect_error(lambda: r.execute_command("SF.BUILD", "b1", "ITEMS", "z"), "item exists")
    assert r.execute_command("SF.BUILD", "b1", "REPLACE", "ITEMS", "z") in (b"OK", True)
    assert r.execute_command("SF.MEXISTS", "b1", "z") == [1]
    expect_error(lambda: r.execute_command("SF.BUILD", "bf", "REPLACE", "ITEMS", "z"), WRONGTYPE)
    expect_error(lambda: r.execute_command("SF.BUILDMAP", "c1", "ITEMS", "k", "1", "k", "2"),
                 "item 'k' is given two different values")
    expect_error(lambda: r.execute_command("SF.BUILDMAP", "c1", "VALUEBITS", "4", "ITEMS", "k", "16"),
                 "the value 16 of item 'k' does not fit in 4 bits")
    expect_error(lambda: r.execute_command("SF.BUILDMAP", "c1", "ITEMS", "k", "x"),
                 "bad value: an integer between 0 and 4294967295")
    expect_error(lambda: r.execute_command("SF.BUILDMAP", "c1", "ITEMS", "k", "4294967296"),
                 "bad value: an integer between 0 and 4294967295")
    expect_error(lambda: r.execute_command("SF.BUILDMAP", "c1", "ITEMS", "k", "1", "j"),
                 "ITEMS needs item value pairs")
    # the widest cells: 32 value bits and 24 check bits
    assert r.execute_command("SF.BUILDMAP", "wide", "VALUEBITS", "32", "CHECKBITS", "24",
                             "ITEMS", "k", "4294967295") in (b"OK", True)
    assert r.execute_command("SF.GET", "wide", "k") == 4294967295
    expect_error(lambda: r.execute_command("SF.BUILDMAP", "c1", "VALUEBITS", "33", "ITEMS", "k", "1"),
                 "VALUEBITS must be between 1 and 32")
    expect_error(lambda: r.execute_command("SF.BUILDMAP", "c1", "CHECKBITS", "25", "ITEMS", "k", "1"),
                 "CHECKBITS must be between 0 and 24")
    expect_error(lambda: r.execute_command("SF.BUILD", "c1", "BITS", "9", "ITEMS", "k"),
                 "BITS must be 8, 12 or 16")
    expect_error(lambda: r.execute_command("SF.BUILD", "c1", "BITS", "8", "ERROR", "0.01", "ITEMS", "k"),
                 "give ERROR or BITS, not both")
    expect_error(lambda: r.execute_command("SF.BUILD", "c1", "ERROR", "0.000001", "ITEMS", "k"),
                 "a static filter reaches 2^-16 = 0.0015% at best")
    expect_error(lambda: r.execute_command("SF.BUILD", "c1", "NOPE", "ITEMS", "k"),
                 "Unknown argument received")
    # BUMPED: the one-line filter, 8 or 16 bits; 500 members all found
    assert r.execute_command("SF.BUILD", "bb", "BUMPED", "ITEMS", *MEMBERS[:500]) in (b"OK", True)
    assert r.execute_command("SF.MEXISTS", "bb", *MEMBERS[:500]) == [1] * 500
    assert r.execute_command("SF.INFO", "bb", "TYPE") == [b"static filter (bumped)"]
    assert r.execute_command("SF.BUILD", "bb16", "ERROR", "0.001", "BUMPED", "ITEMS", "x") in (b"OK", True)
    assert float(r.execute_command("SF.INFO", "bb16", "ERROR")[0]) == 2 ** -16
    expect_error(lambda: r.execute_command("SF.BUILD", "c1", "BITS", "12", "BUMPED", "ITEMS", "k"),
                 "BUMPED filters take BITS 8 or 16")
    expect_error(lambda: r.execute_command("SF.BUILDMAP", "c1", "BUMPED", "ITEMS", "k", "1"),
                 "Unknown argument received")
    expect_error(lambda: r.execute_command("SF.BUILD", "c1", "ITEMS"),
                 "wrong number of arguments for 'sf.build' command")
    expect_error(lambda: r.execute_command("SF.BUILD", "c1", "REPLACE", "x", "y"),
                 "Unknown argument received")
    assert r.exists("c1") == 0
    # a map built here answers like the CLI's map of the same pairs
    args = []
    for k in MEMBERS[:500]:
        args += [k, str(VALUES[k])]
    assert r.execute_command("SF.BUILDMAP", "bm2", "ITEMS", *args) in (b"OK", True)
    assert r.execute_command("SF.MGET", "bm2", *MEMBERS[:500]) == [VALUES[k] for k in MEMBERS[:500]]


def built_keys_answer(r):
    assert r.execute_command("SF.MEXISTS", "b1", "z") == [1]
    assert r.execute_command("SF.MEXISTS", "bb", *MEMBERS[:500]) == [1] * 500
    assert r.execute_command("SF.MGET", "bm", "a", "b") == [1, 200]
    assert r.execute_command("SF.MGET", "bm2", *MEMBERS[:500]) == [VALUES[k] for k in MEMBERS[:500]]


def command_docs(srv, r):
    c = resp3.Conn(srv.port)
    try:
        docs = c.call("COMMAND", "DOCS", "sf.mget")

        def flat(x):
            return [y for e in x for y in flat(e)] if isinstance(x, list) else [x]
        assert docs[0] == b"sf.mget", docs
        assert b"The values of items in a static map, nil for each certainly absent" \
            in flat(docs), docs
        assert flat(docs)[flat(docs).index(b"group") + 1] == b"sf", docs
        # arity from the table
        assert isinstance(c.call("SF.MGET", "m"), resp3.Err)
        assert c.call("SF.MGET", "m") == "ERR wrong number of arguments for 'sf.mget' command"
    finally:
        c.close()


# -- bloomkit-server only: restarts ---------------------------------------

def restart_from_log(srv, r):
    """SIGKILL: the keys come back from the append-only log alone."""
    from harness import restarted
    r = restarted(srv, r, save=False)
    answers_equal(r)
    built_keys_answer(r)
    return r


def restart_from_snapshot(srv, r):
    from harness import restarted
    r = restarted(srv, r, save=True)
    answers_equal(r)
    built_keys_answer(r)
    return r


def mapped_snapshot(srv, r):
    """Filters above --map-threshold are saved to files of their own and
    mapped at start: static keys too."""
    from harness import Server
    fs = files()
    with Server("--map-threshold", "1000") as s2:
        push(s2, fs.filter, "f")
        push(s2, fs.map, "m")
        r2 = s2.client()
        assert r2.save()
        s2.stop()
        bkf = [n for d, _, ns in os.walk(s2.dir) for n in ns if n.endswith(".bkf")]
        assert len(bkf) == 2, bkf
        s2.start()
        answers_equal(s2.client())


def build_memory_limit(srv, r):
    """A build is refused before it allocates when the construction's
    temporary memory and the result would pass maxmemory (60000 bytes: 300
    keys fit, 3000 do not: ~45 bytes a key while building)."""
    from harness import Server
    with Server("--maxmemory", "60000") as s2:
        r2 = s2.client()
        expect_error(lambda: r2.execute_command("SF.BUILD", "s", "ITEMS", *MEMBERS),
                     "filter would exceed maxmemory")
        pairs = [x for k in MEMBERS for x in (k, str(VALUES[k]))]
        expect_error(lambda: r2.execute_command("SF.BUILDMAP", "m", "ITEMS", *pairs),
                     "filter would exceed maxmemory")
        assert r2.exists("s", "m") == 0
        assert r2.execute_command("SF.BUILD", "s", "ITEMS", *MEMBERS[:300]) in (b"OK", True)


def bumped_filter(srv, r):
    """A bumped static filter (`bloomkit create --type bumped`, one line per
    lookup) pushed into an SF key answers what `bloomkit check` answers on
    the file, keeps answering after DUMP/RESTORE, and SF.INFO names it."""
    fs = files()
    path = os.path.join(fs.dir, "b.bkf")
    cli("create", "--force", "--type", "bumped", path, fs.keys)
    found = set(cli("check", path, fs.probes).split())
    want = [1 if k in found else 0 for k in PROBES]
    assert want[:N] == [1] * N
    push(srv, path, "bumped", "--chunk-size", "700", "--replace")
    assert r.execute_command("SF.MEXISTS", "bumped", *PROBES) == want
    assert r.type("bumped") == b"bkstatic-"
    info = r.execute_command("SF.INFO", "bumped")
    info = dict(zip(info[::2], info[1::2]))
    assert info[b"Type"] == b"static filter (bumped)", info
    assert info[b"Number of items"] == N
    assert float(info[b"Error rate"]) == 2 ** -8
    assert 8.0 < float(info[b"Bits per item"]) < 16.0
    dumped = r.dump("bumped")
    r.delete("bumped")
    assert r.restore("bumped", 0, dumped) in (b"OK", True)
    assert r.execute_command("SF.MEXISTS", "bumped", *PROBES) == want
    expect_error(lambda: r.execute_command("SF.GET", "bumped", MEMBERS[0]), NOT_MAP)
    r.delete("bumped")


def copy_between_servers(srv, r):
    from harness import Server
    with Server() as dst:
        out = cli("copy", "127.0.0.1:%d" % srv.port, "127.0.0.1:%d" % dst.port,
                  "--pattern", "[fm]")
        assert out.startswith("copied 2 keys"), out
        answers_equal(dst.client())


def main():
    from harness import run_steps
    try:
        files()
    except Exception as e:
        print("the CLI is unavailable: %s" % e)
        print("0 passed, 1 failed (not run)")
        return 1
    return run_steps([pushed_keys_answer_like_the_cli, info_fields, resp_types, wrong_kinds,
                      scandump_loadchunk, corrupt_chunks, pull_round_trip,
                      push_replace_is_atomic, dump_restore,
                      builds, command_docs, restart_from_log, restart_from_snapshot,
                      mapped_snapshot, build_memory_limit, bumped_filter,
                      copy_between_servers],
                     cleanup=lambda: files().close())


if __name__ == "__main__":
    sys.exit(main())
