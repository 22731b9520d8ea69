#!/usr/bin/python3
"""Check bloomkit's RedisBloom cuckoo layout (lib/rcuckoo.c) against the
whole RedisBloom 2.6.28 corpus, at library level, through the shared
library given as argv[1].

For every CF key of tests/golden/redisbloom/redisbloom-2.6.28.json.gz:

  * rebuilt from the CF.SCANDUMP chunks, and again from the DUMP payload's
    fields (parsed here and fed to bk_rcuckoo_load_fields), every
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
import gzip
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "golden", "redisbloom", "redisbloom-2.6.28.json.gz")

BK_OK = 0
INFO_NAMES = ["Size", "Number of buckets", "Number of filters", "Number of items inserted",
              "Number of items deleted", "Bucket size", "Expansion rate", "Max iterations"]


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


# ---------------------------------------------------------------- library

GET_U = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_uint64))
GET_D = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_double))
GET_S = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_void_p), C.POINTER(C.c_size_t))
PUT_U = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_uint64)
PUT_D = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_double)
PUT_S = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.c_size_t)


class RFields(C.Structure):
    _fields_ = [("ctx", C.c_void_p), ("get_unsigned", GET_U), ("get_double", GET_D),
                ("get_string", GET_S), ("put_unsigned", PUT_U), ("put_double", PUT_D),
                ("put_string", PUT_S)]


def load_lib(path):
    lib = C.CDLL(path)
    P = C.c_void_p
    sig = {
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
        "bk_rcuckoo_load_fields": (C.c_int, [C.POINTER(P), C.c_int, C.POINTER(RFields)]),
        "bk_rcuckoo_save_fields": (C.c_int, [P, C.POINTER(RFields)]),
        "bk_rcuckoo_encver": (C.c_int, []),
        "bk_errname": (C.c_char_p, [C.c_int]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


# ---------------------------------------------------------------- DUMP payload

def rdb_len(b, i):
    """Redis RDB length encoding: (value, next index, is_special)."""
    t = b[i] >> 6
    if t == 0:
        return b[i] & 0x3F, i + 1, False
    if t == 1:
        return ((b[i] & 0x3F) << 8) | b[i + 1], i + 2, False
    if t == 3:
        return b[i] & 0x3F, i + 1, True
    if b[i] == 0x80:
        return int.from_bytes(b[i + 1:i + 5], "big"), i + 5, False
    if b[i] == 0x81:
        return int.from_bytes(b[i + 1:i + 9], "big"), i + 9, False
    raise Fail("bad RDB length byte 0x%02x at %d" % (b[i], i))


def lzf_decompress(src, out_len):
    out = bytearray()
    i = 0
    while i < len(src):
        ctrl = src[i]
        i += 1
        if ctrl < 32:
            out += src[i:i + ctrl + 1]
            i += ctrl + 1
        else:
            n = ctrl >> 5
            if n == 7:
                n += src[i]
                i += 1
            ref = len(out) - ((ctrl & 0x1F) << 8) - src[i] - 1
            i += 1
            for _ in range(n + 2):
                out.append(out[ref])
                ref += 1
    check(len(out) == out_len, "LZF gave %d bytes, expected %d" % (len(out), out_len))
    return bytes(out)


def rdb_string(b, i):
    v, i, special = rdb_len(b, i)
    if not special:
        return b[i:i + v], i + v
    if v == 0:
        return str(int.from_bytes(b[i:i + 1], "little", signed=True)).encode(), i + 1
    if v == 1:
        return str(int.from_bytes(b[i:i + 2], "little", signed=True)).encode(), i + 2
    if v == 2:
        return str(int.from_bytes(b[i:i + 4], "little", signed=True)).encode(), i + 4
    if v == 3:
        clen, i, _ = rdb_len(b, i)
        ulen, i, _ = rdb_len(b, i)
        return lzf_decompress(b[i:i + clen], ulen), i + clen
    raise Fail("unknown string encoding %d" % v)


def parse_dump(payload):
    """(encver, [(kind, value)]) of a module value's DUMP payload."""
    check(payload[0] == 7, "DUMP type byte %d, expected 7 (module value v2)" % payload[0])
    module_id, i, _ = rdb_len(payload, 1)
    encver = module_id & 0x3FF
    fields = []
    while True:
        op, i, _ = rdb_len(payload, i)
        if op == 0:
            break
        if op in (1, 2):
            v, i, _ = rdb_len(payload, i)
            fields.append(("u", v))
        elif op == 3:
            raise Fail("float field in a CF payload")
        elif op == 4:
            fields.append(("d", payload[i:i + 8]))
            i += 8
        elif op == 5:
            s, i = rdb_string(payload, i)
            fields.append(("s", s))
        else:
            raise Fail("unknown module opcode %d" % op)
    check(len(payload) - i == 10, "payload tail of %d bytes, expected 10" % (len(payload) - i))
    return encver, fields


class Reader:
    def __init__(self, fields):
        self.fields = fields
        self.pos = 0
        self.keep = None
        self.rf = RFields(None, GET_U(self.get_u), GET_D(self.get_d), GET_S(self.get_s),
                          PUT_U(0), PUT_D(0), PUT_S(0))

    def take(self, kind):
        if self.pos >= len(self.fields) or self.fields[self.pos][0] != kind:
            return None
        self.pos += 1
        return self.fields[self.pos - 1][1]

    def get_u(self, ctx, out):
        v = self.take("u")
        if v is None:
            return 1
        out[0] = v
        return 0

    def get_d(self, ctx, out):
        return 1

    def get_s(self, ctx, p, n):
        v = self.take("s")
        if v is None:
            return 1
        self.keep = C.create_string_buffer(v, len(v))
        p[0] = C.cast(self.keep, C.c_void_p)
        n[0] = len(v)
        return 0


class Writer:
    def __init__(self):
        self.fields = []
        self.rf = RFields(None, GET_U(0), GET_D(0), GET_S(0), PUT_U(self.put_u),
                          PUT_D(self.put_d), PUT_S(self.put_s))

    def put_u(self, ctx, v):
        self.fields.append(("u", v))
        return 0

    def put_d(self, ctx, v):
        self.fields.append(("d", v))
        return 0

    def put_s(self, ctx, p, n):
        self.fields.append(("s", C.string_at(p, n)))
        return 0


# ---------------------------------------------------------------- checks

def item(key, i):
    return ("%s:%06d:%x" % (key, i, (i * 2654435761) & 0xFFFFFFFF)).encode()


def absent(i):
    return ("absent:%07d" % i).encode()


class Filter:
    def __init__(self, lib, handle):
        self.lib = lib
        self.h = handle

    def __del__(self):
        if self.h:
            self.lib.bk_rcuckoo_free(self.h)


def err(lib, rc):
    return "%d (%s)" % (rc, lib.bk_errname(rc).decode())


def from_chunks(lib, pairs):
    check(pairs[0][0] == 1, "first SCANDUMP iterator is %d" % pairs[0][0])
    out = C.c_void_p()
    hdr = pairs[0][1]
    rc = lib.bk_rcuckoo_from_header(C.byref(out), hdr, len(hdr))
    check(rc == BK_OK, "from_header: %s" % err(lib, rc))
    f = Filter(lib, out)
    for it, data in pairs[1:]:
        rc = lib.bk_rcuckoo_load_chunk(f.h, it, data, len(data))
        check(rc == BK_OK, "load_chunk(%d, %d bytes): %s" % (it, len(data), err(lib, rc)))
    return f


def from_fields(lib, encver, fields):
    r = Reader(fields)
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
    L = f.lib
    n = L.bk_rcuckoo_header(f.h, None, 0)
    buf = C.create_string_buffer(n)
    check(L.bk_rcuckoo_header(f.h, buf, n) == n, "header size changed")
    pairs = [(1, buf.raw)]
    it = 1
    while True:
        nxt, data, ln = C.c_uint64(), C.c_void_p(), C.c_size_t()
        rc = L.bk_rcuckoo_chunk(f.h, it, C.byref(nxt), C.byref(data), C.byref(ln))
        check(rc == BK_OK, "chunk(%d): %s" % (it, err(L, rc)))
        if nxt.value == 0:
            check(ln.value == 0, "chunk after the last has %d bytes" % ln.value)
            return pairs
        pairs.append((nxt.value, C.string_at(data, ln.value)))
        it = nxt.value


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
    with gzip.open(CORPUS) as fh:
        corpus = json.load(fh)
    keys = [k for k in corpus["keys"] if k["type"] == "cf"]
    check(len(keys) >= 5, "only %d CF keys in the corpus" % len(keys))
    for meta in keys:
        key = meta["key"]
        ans = corpus["answers"][key]
        pairs = [(it, base64.b64decode(c)) for it, c in ans["scandump"]]
        payload = base64.b64decode(ans["dump"])
        encver, fields = parse_dump(payload)
        check(encver == 4, "%s: payload encver %d" % (key, encver))

        f = from_chunks(lib, pairs)
        hits, fps = check_answers(f, key, meta, ans, "chunks")
        same_chunks(key, "chunks", dump_chunks(f), pairs)

        g = from_fields(lib, encver, fields)
        check_answers(g, key, meta, ans, "fields")
        same_chunks(key, "fields", dump_chunks(g), pairs)
        w = Writer()
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
    except Fail as e:
        print("FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)
