#!/usr/bin/env python3
"""Check lib/rbloom.c against the whole RedisBloom 2.6.28 corpus.

Usage: test_lib_rbloom.py path/to/libbloomkit.so [corpus.json.gz]

For every Bloom key of tests/golden/redisbloom/redisbloom-2.6.28.json.gz,
the filter is rebuilt twice, from its SCANDUMP chunks and from the fields of
its DUMP payload (parsed by corpus.py: Redis's RDB module encoding, LZF
strings included), and each copy must:
  - answer every present and absent item exactly as RedisBloom did;
  - report RedisBloom's BF.INFO values;
  - give back RedisBloom's SCANDUMP chunks and iterators byte for byte;
  - write (save_fields) the very field sequence of the DUMP payload;
  - round-trip through bloomkit's own file format unchanged;
A chain made the way RedisBloom made the key (create + the same adds) must
give RedisBloom's chunks byte for byte too. Each rebuilt copy then takes
10,000 new items, every one found afterwards (a non-scaling
chain may refuse with BK_EFULL only once it is full).
Exit status 0 when everything matches, 1 with a message otherwise.
Standard library only.
"""
import base64
import ctypes as C
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus import (CORPUS as DEFAULT_CORPUS, U64P, FieldReader, FieldWriter,  # noqa: E402
                    absent, chunks, err, item, load_chunks, load_corpus, parse_dump,
                    read_chunks)
import corpus  # noqa: E402

BK_EFULL = -8
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("MISMATCH: " + msg, file=sys.stderr)


# ---------------------------------------------------------------------------
# The library
# ---------------------------------------------------------------------------

def load_lib(path):
    vp, sz, u64, u32, i32 = C.c_void_p, C.c_size_t, C.c_uint64, C.c_uint32, C.c_int
    RF = C.POINTER(corpus.RFields)
    return corpus.load_lib(path, {
        "bk_rbloom_from_header": (i32, [C.POINTER(vp), C.c_char_p, sz]),
        "bk_rbloom_load_chunk": (i32, [vp, u64, C.c_char_p, sz]),
        "bk_rbloom_contains": (i32, [vp, C.c_char_p, sz]),
        "bk_rbloom_add": (i32, [vp, C.c_char_p, sz]),
        "bk_rbloom_free": (None, [vp]),
        "bk_rbloom_capacity": (u64, [vp]),
        "bk_rbloom_size": (u64, [vp]),
        "bk_rbloom_stages": (u32, [vp]),
        "bk_rbloom_items": (u64, [vp]),
        "bk_rbloom_expansion": (u32, [vp]),
        "bk_rbloom_header": (sz, [vp, vp, sz]),
        "bk_rbloom_chunk": (i32, [vp, u64, U64P, C.POINTER(vp), C.POINTER(sz)]),
        "bk_rbloom_load_fields": (i32, [C.POINTER(vp), i32, RF]),
        "bk_rbloom_save_fields": (i32, [vp, RF]),
        "bk_rbloom_encver": (i32, []),
        "bk_rbloom_create": (i32, [C.POINTER(vp), u64, C.c_double, u32]),
        "bk_rbloom_as_filter": (vp, [vp]),
        "bk_filter_as_rbloom": (vp, [vp]),
        "bk_filter_serialized_size": (u64, [vp]),
        "bk_filter_serialize": (i32, [vp, vp, sz]),
        "bk_filter_deserialize": (i32, [C.POINTER(vp), vp, sz]),
        "bk_filter_free": (None, [vp]),
    })


def from_chunks(L, pairs):
    return load_chunks(L, "bk_rbloom", pairs)


def from_fields(L, encver, fields):
    r = FieldReader(fields)
    f = C.c_void_p()
    rc = L.bk_rbloom_load_fields(C.byref(f), encver, C.byref(r.rf))
    if rc != 0:
        raise ValueError("load_fields: " + err(L, rc))
    if r.pos != len(fields):
        L.bk_rbloom_free(f)
        raise ValueError("load_fields read %d of %d fields" % (r.pos, len(fields)))
    return f


def save_fields(L, f):
    w = FieldWriter()
    rc = L.bk_rbloom_save_fields(f, C.byref(w.rf))
    if rc != 0:
        raise ValueError("save_fields: " + err(L, rc))
    return w.fields


def info_of(L, f):
    exp = L.bk_rbloom_expansion(f)
    return ["Capacity", L.bk_rbloom_capacity(f), "Size", L.bk_rbloom_size(f),
            "Number of filters", L.bk_rbloom_stages(f),
            "Number of items inserted", L.bk_rbloom_items(f),
            "Expansion rate", None if exp == 0 else exp]


def scandump_of(L, f):
    return read_chunks(L, "bk_rbloom", f)


def check_answers(L, f, key, spec, ans, how):
    n_bad = 0
    for i, want in enumerate(ans["present"]):
        it = item(key, i)
        got = L.bk_rbloom_contains(f, it, len(it))
        if got != want:
            n_bad += 1
            if n_bad <= 5:
                fail("%s via %s: present item %d answered %d, RedisBloom %d" % (key, how, i, got, want))
    for i, want in enumerate(ans["absent"]):
        it = absent(i)
        got = L.bk_rbloom_contains(f, it, len(it))
        if got != want:
            n_bad += 1
            if n_bad <= 5:
                fail("%s via %s: absent item %d answered %d, RedisBloom %d" % (key, how, i, got, want))
    if n_bad:
        fail("%s via %s: %d answers differ" % (key, how, n_bad))
    return len(ans["present"]), sum(ans["absent"])


def check_same(L, f, key, how, ans, want_pairs, fields):
    info = info_of(L, f)
    if info != ans["info"]:
        fail("%s via %s: INFO %r, RedisBloom %r" % (key, how, info, ans["info"]))
    got = scandump_of(L, f)
    if len(got) != len(want_pairs):
        fail("%s via %s: %d SCANDUMP chunks, RedisBloom %d" % (key, how, len(got), len(want_pairs)))
    for k, ((gi, gd), (wi, wd)) in enumerate(zip(got, want_pairs)):
        if gi != wi or gd != wd:
            fail("%s via %s: SCANDUMP chunk %d differs (iterator %d vs %d, %d vs %d bytes)"
                 % (key, how, k, gi, wi, len(gd), len(wd)))
    saved = save_fields(L, f)
    if saved != fields:
        where = next((k for k, (a, b) in enumerate(zip(saved, fields)) if a != b), min(len(saved), len(fields)))
        fail("%s via %s: save_fields differs from the DUMP payload at field %d" % (key, how, where))


def file_round_trip(L, f, key, how, want_pairs):
    g = L.bk_rbloom_as_filter(f)
    n = L.bk_filter_serialized_size(g)
    if n == 0:
        fail("%s via %s: serialized size 0" % (key, how))
        return
    buf = C.create_string_buffer(n)
    rc = L.bk_filter_serialize(g, buf, n)
    if rc != 0:
        fail("%s via %s: serialize %s" % (key, how, err(L, rc)))
        return
    h = C.c_void_p()
    rc = L.bk_filter_deserialize(C.byref(h), buf, n)
    if rc != 0:
        fail("%s via %s: deserialize %s" % (key, how, err(L, rc)))
        return
    r = L.bk_filter_as_rbloom(h)
    if not r:
        fail("%s via %s: deserialized filter is not an rbloom" % (key, how))
    elif scandump_of(L, r) != want_pairs:
        fail("%s via %s: chunks differ after the bloomkit file round trip" % (key, how))
    L.bk_filter_free(h)


def new_adds(L, f, key, how, nonscaling):
    items0 = L.bk_rbloom_items(f)
    added, full = 0, 0
    kept = []
    for i in range(10000):
        it = ("%s:new:%d" % (key, i)).encode()
        rc = L.bk_rbloom_add(f, it, len(it))
        if rc == BK_EFULL and nonscaling:
            full += 1
            continue
        if rc not in (0, 1):
            fail("%s via %s: new add %d: %s" % (key, how, i, err(L, rc)))
            return
        added += rc
        kept.append(it)
    missing = sum(1 for it in kept if L.bk_rbloom_contains(f, it, len(it)) != 1)
    if missing:
        fail("%s via %s: %d new items not found" % (key, how, missing))
    if L.bk_rbloom_items(f) != items0 + added:
        fail("%s via %s: items %d after adds, expected %d" % (key, how, L.bk_rbloom_items(f), items0 + added))
    if full and L.bk_rbloom_capacity(f) != L.bk_rbloom_items(f):
        fail("%s via %s: refused as full below capacity" % (key, how))
    return added, full


def create_args(spec):
    """bk_rbloom_create's arguments for the key's BF.RESERVE (or BF.ADD's
    defaults: 100 items at 1%, expansion 2)."""
    cmd = spec["create"]
    if cmd is None:
        return 100, 0.01, 2
    error, capacity, expansion = float(cmd[2]), int(cmd[3]), 2
    rest = [a.upper() for a in cmd[4:]]
    if "NONSCALING" in rest:
        expansion = 0
    if "EXPANSION" in rest:
        expansion = int(cmd[4 + rest.index("EXPANSION") + 1])
    return capacity, error, expansion


def replay(L, spec, ans, want_pairs):
    """Make the key as RedisBloom did and add its items: the chunks must be
    RedisBloom's, byte for byte (sizing, growth and hashing all exact)."""
    key = spec["key"]
    capacity, error, expansion = create_args(spec)
    f = C.c_void_p()
    rc = L.bk_rbloom_create(C.byref(f), capacity, error, expansion)
    if rc != 0:
        fail("%s replay: create %s" % (key, err(L, rc)))
        return
    try:
        for i in range(spec["added"]):
            it = item(key, i)
            rc = L.bk_rbloom_add(f, it, len(it))
            if rc not in (0, 1):
                fail("%s replay: add %d: %s" % (key, i, err(L, rc)))
                return
        if info_of(L, f) != ans["info"]:
            fail("%s replay: INFO %r, RedisBloom %r" % (key, info_of(L, f), ans["info"]))
        got = scandump_of(L, f)
        if got != want_pairs:
            fail("%s replay: SCANDUMP differs from RedisBloom's (%d vs %d chunks)"
                 % (key, len(got), len(want_pairs)))
        else:
            print("%-14s replayed: create + %d adds give RedisBloom's chunks" % (key, spec["added"]))
    finally:
        L.bk_rbloom_free(f)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    L = load_lib(sys.argv[1])
    data = load_corpus(sys.argv[2] if len(sys.argv) > 2 else DEFAULT_CORPUS)
    if L.bk_rbloom_encver() != 4:
        fail("bk_rbloom_encver() = %d, RedisBloom 2.6 writes 4" % L.bk_rbloom_encver())
    nkeys = 0
    for spec in data["keys"]:
        if spec["type"] != "bf":
            continue
        key = spec["key"]
        nkeys += 1
        ans = data["answers"][key]
        want_pairs = chunks(ans)
        encver, fields = parse_dump(base64.b64decode(ans["dump"]))
        if encver != 4:
            fail("%s: DUMP encver %d, expected 4" % (key, encver))
        nonscaling = ans["info"][-1] is None
        replay(L, spec, ans, want_pairs)
        for how in ("chunks", "fields"):
            try:
                f = from_chunks(L, want_pairs) if how == "chunks" else from_fields(L, encver, fields)
            except ValueError as e:
                fail("%s via %s: %s" % (key, how, e))
                continue
            try:
                npres, nfp = check_answers(L, f, key, spec, ans, how)
                check_same(L, f, key, how, ans, want_pairs, fields)
                file_round_trip(L, f, key, how, want_pairs)
                res = new_adds(L, f, key, how, nonscaling)
            finally:
                L.bk_rbloom_free(f)
            print("%-14s via %-6s: %6d present, %3d/20000 false positives, %d chunks, %d fields; "
                  "new adds %s" % (key, how, npres, nfp, len(want_pairs), len(fields), res))
    if nkeys == 0:
        fail("no BF keys in the corpus")
    if FAILURES:
        print("%d mismatches" % len(FAILURES), file=sys.stderr)
        return 1
    print("OK: %d BF keys match RedisBloom 2.6.28 through chunks and fields" % nkeys)
    return 0


if __name__ == "__main__":
    sys.exit(main())
