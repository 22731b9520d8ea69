#!/usr/bin/python3
"""CF keys in a data directory written before CF keys held one filter of
stages: the snapshot then had one cuckoo image per stage. Two fixtures,
made by bloomkit-server of that version (CF.RESERVE k 50 BUCKETSIZE 2
EXPANSION 2; CF.ADD item:0 .. item:389, 4 stages; CF.DEL item:0, item:4,
..., item:36; CF.ADD item:1; SAVE):

  tests/golden/cf-chain-snapshot/          images inline in the manifest
  tests/golden/cf-chain-snapshot-mapped/   --map-threshold 100: one .bkf a
                                           stage, mapped at start

The server starts on a copy of each (the mapped one with the same
threshold, so the old stages are mapped before they are joined), answers
RedisBloom's CF.INFO figures and every item, and after SAVE and a restart
(now one image of four parts) still does.
"""
import os
import shutil
import tempfile

from harness import Server, Runner, ROOT

GOLDEN = os.path.join(ROOT, "tests", "golden")
KEPT = ["item:%d" % i for i in range(390) if not (i < 40 and i % 4 == 0)]


def copy_fixture(name):
    d = tempfile.mkdtemp(prefix="bk-cfsnap-")
    os.chmod(d, 0o700)
    src = os.path.join(GOLDEN, name)
    for root, _dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        os.makedirs(os.path.join(d, rel), mode=0o700, exist_ok=True)
        for f in files:
            dst = os.path.join(d, rel, f)
            shutil.copyfile(os.path.join(root, f), dst)
            os.chmod(dst, 0o600)
    return d


def check_key(r):
    info = r.cf().info("k")
    got = (info.filterNum, info.bucketNum, info.insertedNum, info.deletedNum,
           info.bucketSize, info.expansionRate, info.maxIteration)
    assert got == (4, 480, 381, 10, 2, 2, 20), got
    # RedisBloom's Size for these 4 stages (40 + 4 x 16 + 480 x 2; issue 31),
    # not the 1036 bytes the one filter holds
    assert info.size == 1064, info.size
    assert r.cf().mexists("k", *KEPT) == [1] * len(KEPT)
    assert r.cf().count("k", "item:1") >= 2


def loads(name, *flags):
    d = copy_fixture(name)
    try:
        with Server(*flags, dir=d) as srv:
            r = srv.client()
            check_key(r)
            # it keeps growing: stage 5 is sized for 50 x 2^4 items
            i = 1000
            while r.cf().info("k").filterNum < 5:
                r.cf().add("k", "item:%d" % i)
                i += 1
            assert r.cf().info("k").bucketNum == 480 + 512
            r.execute_command("SAVE")
            srv.restart()
            r = srv.client()
            assert r.cf().info("k").filterNum == 5
            assert r.cf().mexists("k", *KEPT) == [1] * len(KEPT)
            assert r.cf().exists("k", "item:%d" % (i - 1)) == 1
            assert srv.stop() == 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    run = Runner("cf_stages_snapshot")
    run.check("inline stage images", loads, "cf-chain-snapshot")
    run.check("mapped stage files", loads, "cf-chain-snapshot-mapped", "--map-threshold", "100")
    run.finish()


if __name__ == "__main__":
    main()
