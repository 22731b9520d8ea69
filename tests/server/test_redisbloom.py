#!/usr/bin/python3
"""RedisBloom's data taken over (issue 31): every key of the corpus in
tests/golden/redisbloom/ (written by RedisBloom 2.6.28, README there),
through every door into bloomkit-server, or into Debian's redis-server with
bloomkit.so when $BLOOMKIT_MODULE is set (tests/module/test_redisbloom.py):

  - BF.LOADCHUNK / CF.LOADCHUNK of RedisBloom's SCANDUMP chunks;
  - RESTORE of RedisBloom's DUMP payloads;
  - the module only: Redis loading the dump.rdb RedisBloom wrote, again
    after a SAVE and a restart.

Each key then answers BF/CF.MEXISTS exactly as RedisBloom did (its false
positives included), CF.COUNT of the first ten items too, BF/CF.INFO as
RedisBloom's, SCANDUMP gives back RedisBloom's chunks byte for byte, and
10,000 new adds are all found. Bad RedisBloom data (truncated, flipped,
out-of-order chunks, damaged payloads) is refused with an error and a live
key keeps answering as before.
"""
import base64
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "redisbloom"))
from corpus import CORPUS_DIR, absent_text, item_text as item, load_corpus  # noqa: E402
from harness import MODULE, ROOT, Runner, Server, expect_error  # noqa: E402
from rbstandin import StandIn  # noqa: E402

CLI = os.environ.get("BLOOMKIT_CLI") or os.path.join(ROOT, "build", "release", "cli",
                                                      "bloomkit")

DATA = load_corpus()
KEYS = [k["key"] for k in DATA["keys"]]
TYPE = {k["key"]: k["type"] for k in DATA["keys"]}
ADDED = {k["key"]: k["added"] for k in DATA["keys"]}
ANSWERS = DATA["answers"]
ABSENT = [absent_text(i) for i in range(20000)]
NEW_ADDS = 10000


def prefix(key):
    return "BF" if TYPE[key] == "bf" else "CF"


def mexists(r, key, items, name=None):
    out = []
    for i in range(0, len(items), 2000):
        got = r.execute_command(prefix(key) + ".MEXISTS", name or key, *items[i:i + 2000])
        out.extend(int(x) for x in got)
    return out


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check_answers(r, key, name=None):
    """key (stored under name) answers as RedisBloom did."""
    name = name or key
    ans = ANSWERS[key]
    present = [item(key, i) for i in range(ADDED[key])]
    got = mexists(r, key, present, name)
    assert got == ans["present"], "%s: present item %d: %s, RedisBloom %s" % (
        key, first_diff(got, ans["present"]), got[first_diff(got, ans["present"])],
        ans["present"][first_diff(got, ans["present"])])
    got = mexists(r, key, ABSENT, name)
    assert got == ans["absent"], "%s: absent item %d answers %s, RedisBloom %s" % (
        key, first_diff(got, ans["absent"]), got[first_diff(got, ans["absent"])],
        ans["absent"][first_diff(got, ans["absent"])])
    info = r.execute_command(prefix(key) + ".INFO", name)
    info = [x.decode() if isinstance(x, bytes) else x for x in info]
    assert info == ans["info"], "%s: INFO %s, RedisBloom %s" % (key, info, ans["info"])
    if TYPE[key] == "cf":
        counts = [r.execute_command("CF.COUNT", name, item(key, i)) for i in range(10)]
        assert counts == ans["count_first_10"], "%s: CF.COUNT %s, RedisBloom %s" % (
            key, counts, ans["count_first_10"])


def check_scandump(r, key, name=None):
    """SCANDUMP of an unchanged key: RedisBloom's chunks, byte for byte."""
    name = name or key
    want = [(it, base64.b64decode(c)) for it, c in ANSWERS[key]["scandump"]]
    it, got = 0, []
    while True:
        it, data = r.execute_command(prefix(key) + ".SCANDUMP", name, it)
        if it == 0:
            # RedisBloom's end: "" for BF, nil for CF
            assert data == (None if TYPE[key] == "cf" else b""), (key, data)
            break
        got.append((it, data))
        assert len(got) <= len(want) + 1, key
    assert [g[0] for g in got] == [w[0] for w in want], (key, [g[0] for g in got])
    for i, (g, w) in enumerate(zip(got, want)):
        assert g[1] == w[1], "%s: chunk %d differs (%d bytes, RedisBloom %d)" % (
            key, i, len(g[1]), len(w[1]))


def check_new_adds(r, key, name=None):
    """10,000 new adds, all found after (a non-scaling chain takes them
    until it is full, then answers RedisBloom's error, as RedisBloom does)."""
    name = name or key
    new = ["%s:new:%06d" % (key, i) for i in range(NEW_ADDS)]
    p = r.pipeline(transaction=False)
    if TYPE[key] == "bf":
        for i in range(0, NEW_ADDS, 500):
            p.execute_command("BF.MADD", name, *new[i:i + 500])
    else:
        for x in new:
            p.execute_command("CF.ADD", name, x)
    added = 0
    full = None
    for res in p.execute(raise_on_error=False):
        assert not isinstance(res, Exception), "%s: add failed: %s" % (key, res)
        for x in (res if isinstance(res, list) else [res]):
            if isinstance(x, Exception):
                full = full or str(x)
            elif full is None:
                added += 1
    if key == "bf_nonscaling":
        cap = ANSWERS[key]["info"][1]
        assert full == "non scaling filter is full", full
        assert 0 < added < NEW_ADDS and ANSWERS[key]["info"][7] + added >= cap, added
    else:
        assert full is None and added == NEW_ADDS, (key, full, added)
    got = mexists(r, key, new[:added], name)
    assert got == [1] * added, "%s: new item %d not found" % (key, got.index(0))
    return added


def load_chunks(r, key, name=None):
    name = name or key
    for it, c in ANSWERS[key]["scandump"]:
        assert r.execute_command(prefix(key) + ".LOADCHUNK", name, it,
                                 base64.b64decode(c)) in (b"OK", "OK", True)


def restore(r, key, name=None, replace=False):
    args = ["RESTORE", name or key, 0, base64.b64decode(ANSWERS[key]["dump"])]
    if replace:
        args.append("REPLACE")
    return r.execute_command(*args)


def refused(fn, *words):
    """fn fails with an error holding every one of words."""
    return expect_error(fn, *words, match="words")


def main():
    run = Runner("redisbloom")
    with Server() as srv:
        r = srv.client()

        def door_loadchunk():
            for key in KEYS:
                load_chunks(r, key)
                check_answers(r, key)
                check_scandump(r, key)
            for key in KEYS:
                check_new_adds(r, key)
        run.check("LOADCHUNK of RedisBloom's chunks: its answers, INFO, chunks; new adds",
                  door_loadchunk)

        def door_restore():
            for key in KEYS:
                name = "restored:" + key
                assert restore(r, key, name) in (b"OK", "OK", True)
                check_answers(r, key, name)
                check_scandump(r, key, name)
                t = r.type(name)
                assert t in (b"MBbloom--", b"MBbloomCF") if MODULE else True, t
            # DUMP of a taken-over key is RedisBloom's type again: it restores
            # (here, and in RedisBloom) into the same filter
            for key in KEYS:
                payload = r.dump("restored:" + key)
                r.restore("again:" + key, 0, payload)
                check_answers(r, key, "again:" + key)
                check_scandump(r, key, "again:" + key)
            for key in KEYS:
                check_new_adds(r, key, "restored:" + key)
        run.check("RESTORE of RedisBloom's DUMP payloads, and DUMP back out", door_restore)

        def bad_data():
            key = "bf_exp4"
            chunks = [(it, base64.b64decode(c)) for it, c in ANSWERS[key]["scandump"]]
            hdr = chunks[0][1]
            # a truncated or damaged header makes nothing
            refused(lambda: r.execute_command("BF.LOADCHUNK", "bad1", 1, hdr[:len(hdr) // 2]),
                         "invalid chunk")
            assert r.exists("bad1") == 0
            flipped = bytearray(hdr)
            flipped[0] ^= 0xff   # the total item count's low byte: still valid?
            flipped[8] ^= 0x7f   # the number of stages
            refused(lambda: r.execute_command("BF.LOADCHUNK", "bad2", 1, bytes(flipped)),
                         "invalid chunk")
            assert r.exists("bad2") == 0
            # a data chunk before any header
            refused(lambda: r.execute_command("BF.LOADCHUNK", "bad3", *chunks[1]),
                         "chunk")
            assert r.exists("bad3") == 0
            # a chunk past the filter's end, on a live taken-over key: refused,
            # the key answers as before
            live = "restored:bf_tiny"
            before = mexists(r, "bf_tiny", ABSENT[:2000], live)
            it, data = chunks[-1]
            refused(lambda: r.execute_command("BF.LOADCHUNK", live, it + 10 ** 9, data),
                         "invalid chunk")
            refused(lambda: r.execute_command("BF.LOADCHUNK", live, 5, b"\xff" * 64),
                         "invalid")
            assert mexists(r, "bf_tiny", ABSENT[:2000], live) == before
            ckey = "cf_exp2"
            cchunks = [(it, base64.b64decode(c)) for it, c in ANSWERS[ckey]["scandump"]]
            refused(lambda: r.execute_command("CF.LOADCHUNK", "bad4", 1, cchunks[0][1][:20]),
                         "invalid chunk")
            assert r.exists("bad4") == 0
            # damaged DUMP payloads: refused, the live key untouched
            payload = base64.b64decode(ANSWERS["cf_b4"]["dump"])
            refused(lambda: r.restore("again:cf_b4", 0, payload[:-30], replace=True),
                         "payload")
            bad = bytearray(payload)
            bad[len(bad) // 2] ^= 1
            refused(lambda: r.restore("again:cf_b4", 0, bytes(bad), replace=True),
                         "payload")
            check_answers(r, "cf_b4", "again:cf_b4")
        run.check("bad RedisBloom data is refused; live keys unchanged", bad_data)

        def survives_restart():
            srv.restart()
            r2 = srv.client()
            for key in ("bf_exp4", "cf_exp2", "cf_dup"):
                # the LOADCHUNK door's keys took 10,000 adds since: their
                # items still there are all found
                got = mexists(r2, key, [item(key, i) for i in range(ADDED[key])])
                assert all(g for g, a in zip(got, ANSWERS[key]["present"]) if a), key
                check_answers(r2, key, "again:" + key)
                check_scandump(r2, key, "again:" + key)
        run.check("taken-over keys survive a restart", survives_restart)

        def door_copy():
            # `bloomkit copy` from a RedisBloom server (a stand-in serving the
            # corpus): by chunks, into keys this server does not hold yet
            for key in KEYS:
                r.delete(key)
            with StandIn(ANSWERS, TYPE) as rb:
                out = subprocess.run([CLI, "copy", "127.0.0.1:%d" % rb.port,
                                      "127.0.0.1:%d" % srv.port], capture_output=True,
                                     text=True, timeout=300)
                assert out.returncode == 0, out.stderr
                assert "copied %d keys" % len(KEYS) in out.stdout, out.stdout
                assert "DUMP" not in rb.commands, rb.commands   # chunks, not payloads
            for key in KEYS:
                check_answers(r, key)
                check_scandump(r, key)
            for key in KEYS:
                check_new_adds(r, key)
            # a second copy finds every key there: refused without --replace
            with StandIn(ANSWERS, TYPE) as rb:
                out = subprocess.run([CLI, "copy", "127.0.0.1:%d" % rb.port,
                                      "127.0.0.1:%d" % srv.port], capture_output=True,
                                     text=True, timeout=300)
                assert out.returncode != 0 and "--replace" in out.stderr, out
                out = subprocess.run([CLI, "copy", "--replace", "127.0.0.1:%d" % rb.port,
                                      "127.0.0.1:%d" % srv.port], capture_output=True,
                                     text=True, timeout=300)
                assert out.returncode == 0, out.stderr
            for key in KEYS:
                check_answers(r, key)
        run.check("bloomkit copy from a RedisBloom server (SCANDUMP chunks)", door_copy)

    if MODULE:
        def door_rdb():
            d = tempfile.mkdtemp(prefix="bk-rbrdb-")
            try:
                with gzip.open(os.path.join(CORPUS_DIR, "redisbloom-2.6.28.rdb.gz")) as src, \
                        open(os.path.join(d, "dump.rdb"), "wb") as dst:
                    shutil.copyfileobj(src, dst)
                with Server(dir=d) as srv:
                    r = srv.client()
                    for key in KEYS:
                        check_answers(r, key)
                        check_scandump(r, key)
                    assert r.type("bf_big") == b"MBbloom--"
                    assert r.type("cf_b4") == b"MBbloomCF"
                    r.save()
                    srv.restart()
                    r = srv.client()
                    for key in KEYS:
                        check_answers(r, key)
                        check_scandump(r, key)
                    added = {key: check_new_adds(r, key) for key in KEYS}
                    r.save()
                    srv.restart()
                    r = srv.client()
                    for key in KEYS:
                        new = ["%s:new:%06d" % (key, i) for i in range(added[key])]
                        assert mexists(r, key, new) == [1] * added[key], key
            finally:
                shutil.rmtree(d, ignore_errors=True)
        run.check("the module loads RedisBloom's dump.rdb, and again after SAVE", door_rdb)
    run.finish()


if __name__ == "__main__":
    main()
