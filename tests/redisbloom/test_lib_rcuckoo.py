#!/usr/bin/python3
"""Check bloomkit's RedisBloom cuckoo layout (lib/rcuckoo.c) against the
whole RedisBloom 2.6.28 corpus, at library level, through the shared
library given as argv[1].

For every CF key of tests/golden/redisbloom/redisbloom-2.6.28.json.gz:

  * rebuilt from the CF.SCANDUMP chunks, and again from the DUMP payload's
    fields (parsed by corpus.py, fed to bk_rcuckoo_load_fields), every
    CF.MEXISTS answer (present and absent items, false positives included),
    CF.COUNT of the first ten items and the CF.INFO values are RedisBloom's;
  * header() and chunk() reproduce the SCANDUMP chunks and iterators byte
    for byte, and save_fields reproduces the payload's field sequence;
  * replaying the key's history (create, adds, deletes) from scratch gives
    the same chunks: adds, kicks, growth and deletes place every
    fingerprint where RedisBloom placed it;
  * 10,000 new adds are all found afterwards.

Standard library only. Exits nonzero with a message on the first mismatch.
"""
import base64
import ctypes as C
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus import (CORPUS, BK_OK, CorpusError, FieldReader, FieldWriter,  # noqa: E402
                    absent, chunks, err, item, load_chunks, load_corpus, parse_dump,
                    read_chunks)
import corpus  # noqa: E402

INFO_NAMES = ["Size", "Number of buckets", "Number of filters", "Number of items inserted",
              "Number of items deleted", "Bucket size", "Expansion rate", "Max iterations"]


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


# ---------------------------------------------------------------- library

def load_lib(path):
    P = C.c_void_p
    RF = C.POINTER(corpus.RFields)
    return corpus.load_lib(path, {
        "bk_rcuckoo_create": (C.c_int, [C.POINTER(P), C.c_uint64, C.c_uint32, C.c_uint32, C.c_uint32]),
        "bk_rcuckoo_free": (None, [P]),
        "bk_rcuckoo_add": (C.c_int, [P, C.c_char_p, C.c_size_t]),
        "bk_rcuckoo_add_unique": (C.c_int, [P, C.c_char_p, C.c_size_t]),
        "bk_rcuckoo_contains": (C.c_int, [P, C.c_char_p, C.c_size_t]),
        "bk_rcuckoo_count": (C.c_uint64, [P, C.c_char_p, C.c_size_t]),
        "bk_rcuckoo_remove": (C.c_int, [P, C.c_char_p, C.c_size_t]),
        "bk_rcuckoo_size": (C.c_uint64, [P]),
        "bk_rcuckoo_buckets": (C.c_uint64, [P]),
        "bk_rcuckoo_stages": (C.c_uint32, [P]),
        "bk_rcuckoo_items": (C.c_uint64, [P]),
        "bk_rcuckoo_deleted": (C.c_uint64, [P]),
        "bk_rcuckoo_bucket_size": (C.c_uint32, [P]),
        "bk_rcuckoo_expansion": (C.c_uint32, [P]),
        "bk_rcuckoo_max_iterations": (C.c_uint32, [P]),
        "bk_rcuckoo_header": (C.c_size_t, [P, P, C.c_size_t]),
        "bk_rcuckoo_chunk": (C.c_int, [P, C.c_uint64, C.POINTER(C.c_uint64), C.POINTER(P),
                                       C.POINTER(C.c_size_t)]),
        "bk_rcuckoo_from_header": (C.c_int, [C.POINTER(P), C.c_char_p, C.c_size_t]),
        "bk_rcuckoo_load_chunk": (C.c_int, [P, C.c_uint64, C.c_char_p, C.c_size_t]),
        "bk_rcuckoo_load_fields": (C.c_int, [C.POINTER(P), C.c_int, RF]),
        "bk_rcuckoo_save_fields": (C.c_int, [P, RF]),
        "bk_rcuckoo_encver": (C.c_int, []),
    })


# ---------------------------------------------------------------- checks

class Filter:
    def __init__(self, lib, handle):
        self.lib = lib
        self.h = handle

    def __del__(self):
        if self.h:
            self.lib.bk_rcuckoo_free(self.h)


def from_chunks(lib, pairs):
    return Filter(lib, load_chunks(lib, "bk_rcuckoo", pairs))


def from_fields(lib, encver, fields):
    r = FieldReader(fields)
    out = C.c_void_p()
    rc = lib.bk_rcuckoo_load_fields(C.byref(out), encver, C.byref(r.rf))
    check(rc == BK_OK, "load_fields: %s" % err(lib, rc))
    check(r.pos == len(fields), "load_fields read %d of %d fields" % (r.pos, len(fields)))
    return Filter(lib, out)


def info_of(f):
    L = f.lib
    return [L.bk_rcuckoo_size(f.h), L.bk_rcuckoo_buckets(f.h), L.bk_rcuckoo_stages(f.h),
            L.bk_rcuckoo_items(f.h), L.bk_rcuckoo_deleted(f.h), L.bk_rcuckoo_bucket_size(f.h),
            L.bk_rcuckoo_expansion(f.h), L.bk_rcuckoo_max_iterations(f.h)]


def dump_chunks(f):
    return read_chunks(f.lib, "bk_rcuckoo", f.h)


def expected_info(ans):
    inf = ans["info"]
    d = dict(zip(inf[0::2], inf[1::2]))
    return [d[n] for n in INFO_NAMES]


def check_answers(f, key, meta, ans, how):
    L = f.lib
    got = info_of(f)
    want = expected_info(ans)
    for n, g, w in zip(INFO_NAMES, got, want):
        check(g == w, "%s via %s: CF.INFO %s is %d, RedisBloom %d" % (key, how, n, g, w))
    present = ans["present"]
    check(len(present) == meta["added"], "%s: %d present answers for %d items"
          % (key, len(present), meta["added"]))
    for i, w in enumerate(present):
        g = L.bk_rcuckoo_contains(f.h, item(key, i), len(item(key, i)))
        check(g == w, "%s via %s: item %d answers %d, RedisBloom %d" % (key, how, i, g, w))
    for i, w in enumerate(ans["absent"]):
        a = absent(i)
        g = L.bk_rcuckoo_contains(f.h, a, len(a))
        check(g == w, "%s via %s: absent %d answers %d, RedisBloom %d" % (key, how, i, g, w))
    for i, w in enumerate(ans["count_first_10"]):
        g = L.bk_rcuckoo_count(f.h, item(key, i), len(item(key, i)))
        check(g == w, "%s via %s: CF.COUNT of item %d is %d, RedisBloom %d" % (key, how, i, g, w))
    return sum(present), sum(ans["absent"])


def same_chunks(key, how, got, want):
    check(len(got) == len(want), "%s via %s: %d chunks, SCANDUMP gave %d"
          % (key, how, len(got), len(want)))
    for k, ((gi, gd), (wi, wd)) in enumerate(zip(got, want)):
        check(gi == wi, "%s via %s: chunk %d iterator %d, SCANDUMP %d" % (key, how, k, gi, wi))
        if gd != wd:
            diff = next(j for j in range(min(len(gd), len(wd))) if gd[j] != wd[j]) \
                if len(gd) == len(wd) else -1
            raise Fail("%s via %s: chunk %d differs (%d vs %d bytes, first difference at %d)"
                       % (key, how, k, len(gd), len(wd), diff))


def replay(lib, meta):
    """The key's history from scratch, as the corpus README tells it."""
    key = meta["key"]
    create = meta["create"]
    out = C.c_void_p()
    if create is None:  # CF.ADD on a missing key: CF.RESERVE key 1024 with the defaults
        cap, b, it, e = 1024, 2, 20, 1
    else:
        cap = int(create[2])
        opts = dict(zip([o.upper() for o in create[3::2]], create[4::2]))
        b = int(opts.get("BUCKETSIZE", 2))
        it = int(opts.get("MAXITERATIONS", 20))
        e = int(opts.get("EXPANSION", 1))
    rc = lib.bk_rcuckoo_create(C.byref(out), cap, b, it, e)
    check(rc == BK_OK, "%s: create: %s" % (key, err(lib, rc)))
    f = Filter(lib, out)
    for _ in range(meta.get("dup", 1)):
        for i in range(meta["added"]):
            x = item(key, i)
            rc = lib.bk_rcuckoo_add(f.h, x, len(x))
            check(rc == 1, "%s replay: add %d: %s" % (key, i, err(lib, rc)))
    for i in range(meta["deleted"]):
        x = item(key, i)
        check(lib.bk_rcuckoo_remove(f.h, x, len(x)) == 1, "%s replay: delete %d" % (key, i))
    return f


def main():
    if len(sys.argv) != 2:
        print("usage: test_lib_rcuckoo.py path/to/libbloomkit.so", file=sys.stderr)
        return 2
    lib = load_lib(sys.argv[1])
    check(lib.bk_rcuckoo_encver() == 4, "encver %d, RedisBloom 2.6 writes 4"
          % lib.bk_rcuckoo_encver())
    data = load_corpus(CORPUS)
    keys = [k for k in data["keys"] if k["type"] == "cf"]
    check(len(keys) >= 5, "only %d CF keys in the corpus" % len(keys))
    for meta in keys:
        key = meta["key"]
        ans = data["answers"][key]
        pairs = chunks(ans)
        payload = base64.b64decode(ans["dump"])
        encver, fields = parse_dump(payload)
        check(encver == 4, "%s: payload encver %d" % (key, encver))

        f = from_chunks(lib, pairs)
        hits, fps = check_answers(f, key, meta, ans, "chunks")
        same_chunks(key, "chunks", dump_chunks(f), pairs)

        g = from_fields(lib, encver, fields)
        check_answers(g, key, meta, ans, "fields")
        same_chunks(key, "fields", dump_chunks(g), pairs)
        w = FieldWriter()
        rc = lib.bk_rcuckoo_save_fields(g.h, C.byref(w.rf))
        check(rc == BK_OK, "%s: save_fields: %s" % (key, err(lib, rc)))
        check(w.fields == fields, "%s: save_fields differs from the payload's fields" % key)

        r = replay(lib, meta)
        same_chunks(key, "replay", dump_chunks(r), pairs)

        for n in range(10000):
            x = ("new:%s:%06d" % (key, n)).encode()
            rc = lib.bk_rcuckoo_add(f.h, x, len(x))
            check(rc == 1, "%s: new add %d: %s" % (key, n, err(lib, rc)))
        for n in range(10000):
            x = ("new:%s:%06d" % (key, n)).encode()
            check(lib.bk_rcuckoo_contains(f.h, x, len(x)) == 1, "%s: new item %d lost" % (key, n))
        print("%-10s ok: %d present answers (%d found), %d absent (%d false positives), "
              "%d chunks, %d fields, replay identical, 10000 new adds -> %d stages"
              % (key, len(ans["present"]), hits, len(ans["absent"]), fps, len(pairs),
                 len(fields), lib.bk_rcuckoo_stages(f.h)))
    print("rcuckoo: all %d CF keys match RedisBloom 2.6.28" % len(keys))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (Fail, CorpusError) as e:
        print("FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)
