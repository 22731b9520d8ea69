#!/usr/bin/python3
"""Data at rest in bloomkit-server's data directory (docs/PERSISTENCE.md):
what start-up does when files are missing or damaged.

1. CURRENT deleted: start-up refuses, naming the snapshot and log files it
   found and --rebuild-manifest, and changes nothing; with the flag, CURRENT
   is rebuilt from the newest complete snapshot (an incomplete newer one is
   passed over) and the logs after it, and every acknowledged write is
   there. A damaged CURRENT likewise (kept as CURRENT.damaged-*). A
   directory holding only an empty log (a first start that crashed) starts.
2. A zeroed payload in a mapped snapshot file (--map-threshold 4kb, so small
   filters are mapped): --check-data exits 1 naming the file; `bloomkit
   verify` exits 1 on it, 0 on a sound file, 2 on a missing one; the server
   starts, INFO says the verification is in progress, the damaged key
   answers an error naming the file (verified on first use, before the
   background verifier reaches it), the other keys answer every item; the
   key stays refused across SAVE and restart until DEL.
3. --repair-aof on a log with a bad header and on an empty log: it says what
   it cuts (file, offset, records, bytes) and keeps the cut bytes in
   <log>.cut-<time>; writes in the snapshot are kept.

Runs against $BLOOMKIT_SERVER (CTest's) with $BLOOMKIT_CLI, through
harness.py. Each check takes a few seconds.
"""
import contextlib
import glob
import hashlib
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time

import redis

from harness import Server, Runner, SERVER, children, current, flip_bytes
from harness import info_persistence as info
from harness import end_checked as end  # stop, fail on a sanitizer report


@contextlib.contextmanager
def data_dir(prefix):
    """A server's data directory for one test, removed after it."""
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


CLI = os.environ.get("BLOOMKIT_CLI") or os.path.join(
    os.path.dirname(os.path.dirname(SERVER)), "cli", "bloomkit")



def listing(d):
    """Every file under d (but LOCK) with its size and content hash."""
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            if f == "LOCK":
                continue
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def refused(d, *flags):
    """Start on d expecting a refusal: returns the server's log text."""
    s = Server(*flags, dir=d, wait=False)
    try:
        rc = s.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        text = s.log()
        end(s)
        raise AssertionError("the server started (it should refuse):\n" + text)
    text = s.log()
    end(s)
    assert rc != 0, "exit status 0 on a refusal:\n" + text
    return text


def missing(r, key, items, cmd="BF.MEXISTS"):
    out = []
    for i in range(0, len(items), 500):
        chunk = items[i:i + 500]
        got = r.execute_command(cmd, key, *chunk)
        out += [it for it, g in zip(chunk, got) if g != 1]
    return out


def fill(r, n, tag):
    """BF and CF keys with n items each; returns {key: items}."""
    data = {}
    for k in ("bf:a", "bf:b"):
        items = ["%s-%s-%d" % (tag, k, i) for i in range(n)]
        r.execute_command("BF.MADD", k, *items)
        data[k] = items
    items = ["%s-cf-%d" % (tag, i) for i in range(n)]
    for it in items:
        r.execute_command("CF.ADD", "cf:c", it)
    data["cf:c"] = items
    return data


def check_data(r, data):
    for k, items in data.items():
        lost = missing(r, k, items, "CF.MEXISTS" if k.startswith("cf") else "BF.MEXISTS")
        assert not lost, "%s: %d of %d acknowledged items lost, e.g. %s" % (
            k, len(lost), len(items), lost[:3])


# -- 1. the manifest ---------------------------------------------------------

def test_current_deleted():
    with data_dir("bks-manifest-") as d:
        s = Server("--appendfsync", "always", dir=d)
        r = s.client()
        data = fill(r, 300, "snap")          # into the snapshot
        r.execute_command("SAVE")
        more = fill(r, 200, "log")            # into the log after it
        for k in data:
            data[k] += more[k]
        end(s)
        snap, logs = current(d)
        assert snap > 0
        # An incomplete newer snapshot (a BGSAVE killed midway): passed over.
        os.mkdir(os.path.join(d, "snap-%d" % (max(logs) + 5)))
        with open(os.path.join(d, "snap-%d" % (max(logs) + 5), "manifest"), "wb") as f:
            f.write(b"BKMH" + b"\0" * 20)
        os.unlink(os.path.join(d, "CURRENT"))
        before = listing(d)

        log = refused(d)
        assert "CURRENT" in log and "missing" in log, log
        assert "snap-%d/" % snap in log, "the snapshot is not named:\n" + log
        for g in logs:
            assert "appendonly-%d.log" % g in log, "log %d not named:\n%s" % (g, log)
        assert "--rebuild-manifest" in log, log
        assert listing(d) == before, "a refused start changed the directory"
        assert not os.path.exists(os.path.join(d, "CURRENT"))

        s = Server("--rebuild-manifest", dir=d)
        log = s.log()
        assert "rebuilt" in log and ("snapshot %d" % snap) in log, log
        assert "passed over" in log, "the incomplete snapshot was not reported:\n" + log
        check_data(s.client(), data)
        end(s)
        assert current(d)[0] == snap
        s = Server(dir=d)                     # and for good, without the flag
        check_data(s.client(), data)
        end(s)


def test_current_damaged():
    with data_dir("bks-manifest-") as d:
        s = Server("--appendfsync", "always", dir=d)
        r = s.client()
        data = fill(r, 200, "x")
        r.execute_command("SAVE")
        more = fill(r, 100, "y")
        for k in data:
            data[k] += more[k]
        end(s)
        path = os.path.join(d, "CURRENT")
        flip_bytes(path, 20, 0x01)
        before = listing(d)
        log = refused(d)
        assert "CURRENT" in log and "damaged" in log and "--rebuild-manifest" in log, log
        assert listing(d) == before, "a refused start changed the directory"
        s = Server("--rebuild-manifest", dir=d)
        check_data(s.client(), data)
        end(s)
        assert glob.glob(os.path.join(d, "CURRENT.damaged-*")), "the damaged CURRENT is not kept"


def test_empty_first_start():
    """A first start that crashed before CURRENT leaves an empty log: starts."""
    with data_dir("bks-manifest-") as d:
        open(os.path.join(d, "appendonly-1.log"), "wb").close()
        s = Server(dir=d)
        s.client().execute_command("BF.ADD", "k", "v")
        end(s)


# -- 2. mapped payloads -----------------------------------------------------

def manifest_files(d, snap):
    """{key name: [.bkf paths]} from snap-<snap>/manifest (docs/PERSISTENCE.md)."""
    with open(os.path.join(d, "snap-%d" % snap, "manifest"), "rb") as f:
        m = f.read()
    off, out = 0, {}
    while off < len(m):
        magic, blen = struct.unpack_from("<II", m, off)
        body = m[off + 8:off + 8 + blen]
        off += 16 + blen
        if magic != 0x4B4D4B42:               # BKMK
            continue
        nlen, = struct.unpack_from("<I", body, 0)
        name = body[4:4 + nlen].decode()
        pos = 4 + nlen + 8
        layout, = struct.unpack_from("<I", body, pos)
        pos += 4
        if layout == 1:
            off += struct.unpack_from("<Q", body, pos)[0]
        elif layout == 2:
            pos += 4 + 8 + 4 + 4 + 4 + 8
            nf, = struct.unpack_from("<I", body, pos)
            pos += 4
            for _ in range(nf):
                ln, fno = struct.unpack_from("<QQ", body, pos)
                pos += 16
                if fno == 0:
                    off += ln
                else:
                    out.setdefault(name, []).append(
                        os.path.join(d, "snap-%d" % snap, "%d.bkf" % fno))
    return out


def run_check_data(d):
    p = subprocess.run([SERVER, "--check-data", "--dir", d], capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode() + p.stderr.decode()


def run_verify(*paths):
    p = subprocess.run([CLI, "verify"] + list(paths), capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode() + p.stderr.decode()


def test_mapped_corrupt():
    flags = ("--map-threshold", "4kb")
    with data_dir("bks-mapped-") as d:
        s = Server(*flags, dir=d)
        r = s.client()
        items = {}
        for k in ("m0", "m1", "m2"):
            r.execute_command("BF.RESERVE", k, 0.01, 20000, "NONSCALING")
            items[k] = ["%s-%d" % (k, i) for i in range(500)]
            r.execute_command("BF.MADD", k, *items[k])
        r.execute_command("BF.ADD", "small", "s")
        r.execute_command("SAVE")
        end(s)
        snap, _ = current(d)
        files = manifest_files(d, snap)
        assert set(files) == {"m0", "m1", "m2"}, "expected three mapped keys: %s" % files
        bad = files["m1"][0]
        good = files["m0"][0]
        size = os.path.getsize(bad)
        with open(bad, "r+b") as f:           # zero part of the payload
            f.seek(size // 2)
            f.write(b"\0" * 4096)

        rc, out = run_check_data(d)
        assert rc == 1 and bad in out, "--check-data: exit %d\n%s" % (rc, out)
        # Two damaged files: both reported, the check goes on after the first.
        d2 = d + "-two"
        shutil.copytree(d, d2)
        try:
            other = files["m2"][0].replace(d, d2)
            with open(other, "r+b") as f:
                f.seek(os.path.getsize(other) // 2)
                f.write(b"\0" * 4096)
            rc, out = run_check_data(d2)
            assert rc == 1 and bad.replace(d, d2) in out and other in out, \
                "--check-data with two damaged files: exit %d\n%s" % (rc, out)
        finally:
            shutil.rmtree(d2, ignore_errors=True)
        rc, out = run_verify(bad)
        assert rc == 1 and "CORRUPT" in out and bad in out, "verify bad: %d %s" % (rc, out)
        rc, out = run_verify(good)
        assert rc == 0 and "ok" in out, "verify good: %d %s" % (rc, out)
        rc, out = run_verify(os.path.join(d, "no-such.bkf"))
        assert rc == 2, "verify missing: %d %s" % (rc, out)

        # The verifier is held back 30 s: the keys are checked on first use.
        os.environ["BKS_TEST_VERIFY_DELAY_MS"] = "30000"
        try:
            s = Server(*flags, dir=d)
        finally:
            del os.environ["BKS_TEST_VERIFY_DELAY_MS"]
        r = s.client()
        i = info(r)
        assert i["mapped_verify_in_progress"] == "1" and i["mapped_keys_unverified"] == "3", i
        try:
            r.execute_command("BF.MEXISTS", "m1", *items["m1"][:10])
            raise AssertionError("the corrupt key answered")
        except redis.exceptions.ResponseError as e:
            msg = str(e)
        assert "m1" in msg and bad in msg and "checksum" in msg, msg
        for k in ("m0", "m2"):
            assert not missing(r, k, items[k]), "%s lost items" % k
        assert r.execute_command("BF.EXISTS", "small", "s") == 1
        try:
            r.execute_command("BF.ADD", "m1", "new")
            raise AssertionError("a write to the corrupt key was accepted")
        except redis.exceptions.ResponseError as e:
            assert bad in str(e), str(e)
        try:
            r.execute_command("DUMP", "m1")
            raise AssertionError("DUMP of the corrupt key answered")
        except redis.exceptions.ResponseError as e:
            assert bad in str(e), str(e)
        assert r.execute_command("TYPE", "m1") not in (b"none", "none"), "TYPE lost the key"
        i = info(r)
        assert i["mapped_keys_unverified"] == "0" and i["mapped_keys_corrupt"] == "1", i
        assert bad in s.log() and "refused" in s.log(), s.log()

        # SAVE writes the key as corrupt: still refused after a restart.
        r.execute_command("SAVE")
        end(s)
        s = Server(*flags, dir=d)
        r = s.client()
        try:
            r.execute_command("BF.EXISTS", "m1", "m1-1")
            raise AssertionError("the corrupt key answered after SAVE and restart")
        except redis.exceptions.ResponseError as e:
            assert bad in str(e), str(e)
        for k in ("m0", "m2"):
            assert not missing(r, k, items[k]), "%s lost items after SAVE" % k
        assert info(r)["mapped_keys_corrupt"] == "1"
        end(s)
        rc, out = run_check_data(d)
        assert rc == 1 and "corrupt" in out, "--check-data after SAVE: %d\n%s" % (rc, out)

        s = Server(*flags, dir=d)
        r = s.client()
        assert r.execute_command("DEL", "m1") == 1
        r.execute_command("BF.ADD", "m1", "again")
        r.execute_command("SAVE")
        end(s)
        rc, out = run_check_data(d)
        assert rc == 0, "--check-data on a sound directory: %d\n%s" % (rc, out)
        s = Server(*flags, dir=d)
        r = s.client()
        assert r.execute_command("BF.EXISTS", "m1", "again") == 1
        i = info(r)
        assert i["mapped_keys_corrupt"] == "0"
        end(s)


def test_mapped_background():
    """Without the delay the background verifier checks every key soon."""
    flags = ("--map-threshold", "4kb")
    with data_dir("bks-mapped-") as d:
        s = Server(*flags, dir=d)
        r = s.client()
        for k in ("a", "b"):
            r.execute_command("BF.RESERVE", k, 0.01, 20000)
            r.execute_command("BF.ADD", k, "x")
        r.execute_command("SAVE")
        end(s)
        files = manifest_files(d, current(d)[0])
        bad = files["b"][0]
        flip_bytes(bad, os.path.getsize(bad) // 2, 0xFF, 64)   # bits in the payload
        s = Server(*flags, dir=d)
        r = s.client()
        deadline = time.time() + 10
        while info(r)["mapped_verify_in_progress"] != "0" and time.time() < deadline:
            time.sleep(0.05)
        i = info(r)
        assert i["mapped_keys_unverified"] == "0" and i["mapped_keys_corrupt"] == "1", i
        assert bad in s.log(), s.log()
        assert r.execute_command("BF.EXISTS", "a", "x") == 1
        assert s.stop() == 0, "SHUTDOWN SAVE failed (or a sanitizer report):\n" + s.log()
        end(s)


# -- 3. --repair-aof on a bad header ----------------------------------------

def test_repair_bad_header():
    with data_dir("bks-repair-") as d:
        s = Server("--appendfsync", "always", dir=d)
        r = s.client()
        kept = ["k-%d" % i for i in range(100)]
        r.execute_command("BF.MADD", "bf", *kept)
        r.execute_command("SAVE")
        for i in range(200):
            r.execute_command("BF.ADD", "bf", "cut-%d" % i)
        end(s)
        log = os.path.join(d, "appendonly-%d.log" % current(d)[1][-1])
        with open(log, "rb") as f:
            original = f.read()
        with open(log, "r+b") as f:
            f.seek(3)
            f.write(b"X")
        text = refused(d)
        assert os.path.basename(log) in text and "offset 0" in text, text
        s = Server("--repair-aof", dir=d)
        text = s.log()
        m = re.search(r"file (\S+) offset 0: bad log header: cutting (\d+) bytes holding "
                      r"(\d+) whole records.*kept in (\S+)", text)
        assert m, "no report of the cut:\n" + text
        assert m.group(1) == log and int(m.group(2)) == len(original) and m.group(3) == "200", \
            m.group(0)
        copy = m.group(4)
        with open(copy, "rb") as f:
            kept_bytes = f.read()
        assert kept_bytes[4:] == original[4:] and len(kept_bytes) == len(original), \
            "the kept copy differs from the cut part"
        assert not missing(s.client(), "bf", kept), "the snapshot's writes were lost"
        end(s)

        # A zero-length log: said, nothing to keep, starts.
        log = os.path.join(d, "appendonly-%d.log" % current(d)[1][-1])
        open(log, "wb").close()
        text = refused(d)
        assert "truncated log header" in text, text
        s = Server("--repair-aof", dir=d)
        assert re.search(r"offset 0: truncated log header: cutting 0 bytes holding 0 whole "
                         r"records", s.log()), s.log()
        assert not missing(s.client(), "bf", kept)
        end(s)


def test_idle_save_kept():
    """SAVE, BGSAVE and SHUTDOWN with nothing changed since the installed
    snapshot keep it (issue 32: a stop of an idle server rewrote every
    filter). The snapshot's files are untouched, byte for byte, through two
    SAVEs, a BGSAVE, SHUTDOWN and a restart (whose live log is still empty);
    LASTSAVE moves; one write makes the next SAVE a new snapshot."""
    with data_dir("bk-idle-") as d:
        with Server(dir=d) as srv:
            r = srv.client()
            r.execute_command("BF.RESERVE", "big", 0.01, 2000000)
            r.execute_command("BF.MADD", "big", *["k%d" % i for i in range(1000)])
            r.execute_command("CF.RESERVE", "c", 10000)
            r.execute_command("CF.ADD", "c", "x")
            r.save()
            snap, logs = current(d)
            files = listing(d)
            assert r.info("persistence")["rdb_changes_since_last_save"] == 0
            last = r.lastsave()
            time.sleep(1.1)
            r.save()
            assert r.lastsave() > last
            r.bgsave()
            for _ in range(100):
                if not r.info("persistence")["rdb_bgsave_in_progress"]:
                    break
                time.sleep(0.05)
            assert current(d) == (snap, logs)
            assert listing(d) == files
            assert "nothing changed since snapshot %d" % snap in srv.log()
            assert srv.stop() == 0
            assert current(d) == (snap, logs) and listing(d) == files
            srv.restart()
            r = srv.client()
            assert missing(r, "big", ["k%d" % i for i in range(1000)]) == []
            r.save()
            assert current(d) == (snap, logs) and listing(d) == files
            r.execute_command("BF.ADD", "big", "new")
            r.save()
            assert current(d)[0] > snap
            srv.restart()
            assert srv.client().execute_command("BF.EXISTS", "big", "new") == 1


def inodes(d):
    """{key: inode of its one .bkf file} in the installed snapshot."""
    snap = current(d)[0]
    return {k: os.stat(v[0]).st_ino for k, v in manifest_files(d, snap).items()}


def wait_bgsave(r, last, timeout=60):
    deadline = time.time() + timeout
    while r.lastsave() == last or r.info("persistence")["rdb_bgsave_in_progress"]:
        assert time.time() < deadline, "BGSAVE did not finish"
        time.sleep(0.05)


def test_keys_reused():
    """A snapshot links the filter file of every key that did not change
    since the installed snapshot read or wrote it, and writes the others
    (issue 32: a 1 GB filter beside a changed small key was rewritten at
    every SAVE). Checked by the files' inodes, through SAVE, BGSAVE, a
    restart (files read at start-up), RENAME, DEL and re-create; a write
    made while a BGSAVE child runs keeps its key from being reused from that
    snapshot; every acknowledged item is there after each restart."""
    with data_dir("bk-reuse-") as d:
        with Server("--map-threshold", "64kb", dir=d) as srv:
            r = srv.client()
            data = {}
            for k in ("a", "b", "c"):
                r.execute_command("BF.RESERVE", k, 0.01, 2000000)
                data[k] = ["%s-%d" % (k, i) for i in range(500)]
                r.execute_command("BF.MADD", k, *data[k])
            r.execute_command("BF.ADD", "small", "s0")
            data["small"] = ["s0"]

            def add(k, item):
                r.execute_command("BF.ADD", k, item)
                data[k].append(item)

            def check(restart=False):
                nonlocal r
                if restart:   # a clean stop: no sanitizer report either
                    assert srv.stop() == 0, srv.log()[-3000:]
                    srv.start()
                    r = srv.client()
                for k, items in data.items():
                    assert missing(r, k, items) == [], k

            r.save()
            first = inodes(d)
            assert sorted(first) == ["a", "b", "c"], first
            # a small key changed: every big file is linked, none written
            add("small", "s1")
            r.save()
            assert inodes(d) == first
            assert "3 filter files of unchanged keys linked" in srv.log()
            # one big key changed: only its file is new
            add("a", "a-new")
            r.save()
            now = inodes(d)
            assert now["a"] != first["a"] and now["b"] == first["b"] and now["c"] == first["c"]
            check(restart=True)
            # files read at start-up are linked too, and so is the file a
            # key was given by the last SAVE ("a")
            add("small", "s2")
            r.save()
            assert inodes(d) == now
            # RENAME keeps the file; DEL and a new key of the same name do not
            r.rename("b", "b2")
            data["b2"] = data.pop("b")
            r.delete("c")
            del data["c"]
            r.execute_command("BF.RESERVE", "c", 0.01, 2000000)
            data["c"] = ["c-again"]
            r.execute_command("BF.ADD", "c", "c-again")
            r.save()
            after = inodes(d)
            assert after["b2"] == now["b"] and after["a"] == now["a"], (after, now)
            assert after["c"] != now["c"]
            check(restart=True)
            # BGSAVE links too
            last = r.lastsave()
            time.sleep(1.1)
            add("small", "s3")
            r.bgsave()
            wait_bgsave(r, last)
            assert inodes(d) == after
            # a write while the child runs: that snapshot lacks it, so the
            # key must not take its file; the next SAVE writes it again
            last = r.lastsave()
            time.sleep(1.1)
            add("small", "s4")
            r.bgsave()
            deadline = time.time() + 10
            kid = None
            while kid is None:
                assert time.time() < deadline, "no snapshot child"
                kids = children(srv.proc.pid)
                if kids:
                    kid = kids[0]
                    os.kill(kid, signal.SIGSTOP)
                time.sleep(0.0005)
            # the key changed after the fork (the child may have linked it)
            add("b2", "after-the-fork")
            os.kill(kid, signal.SIGCONT)
            wait_bgsave(r, last)
            add("small", "s5")
            r.save()
            final = inodes(d)
            assert final["b2"] != after["b2"] and final["a"] == after["a"], (final, after)
            check(restart=True)
        rc, out = run_check_data(d)
        assert rc == 0, out


def main():
    run = Runner("test_manifest")
    run.check("SAVE, BGSAVE, SHUTDOWN of an idle server keep the snapshot",
              test_idle_save_kept)
    run.check("a snapshot links the files of keys that did not change", test_keys_reused)
    run.check("CURRENT deleted: refused, rebuilt with the flag", test_current_deleted)
    run.check("CURRENT damaged: refused, rebuilt with the flag", test_current_damaged)
    run.check("empty log, no CURRENT: a fresh start", test_empty_first_start)
    run.check("mapped payload zeroed: key refused, others serve", test_mapped_corrupt)
    run.check("mapped payloads verified in the background", test_mapped_background)
    run.check("--repair-aof on a bad header: says, keeps a copy", test_repair_bad_header)
    run.finish()


if __name__ == "__main__":
    main()
