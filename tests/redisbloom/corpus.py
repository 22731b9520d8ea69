"""corpus.py - reading the RedisBloom 2.6.28 corpus (tests/golden/redisbloom/)
for the tests that check bloomkit against it.

What every such test needs, in one place:

  * the corpus itself (load_corpus) and the recipe of its items: item(key, i)
    is the i-th item the corpus script added to a key, absent(i) the i-th
    item it never added (the MEXISTS answers are for these);
  * the SCANDUMP chunks of a key, decoded (chunks);
  * RedisBloom's DUMP payload taken apart (parse_dump): Redis's RDB module
    value (type 7), its length encoding and LZF-compressed strings, giving
    the encoding version and the sequence of fields RedisBloom's rdb_save
    wrote;
  * the library through ctypes: load_lib, the bk_rfields callback struct
    (RFields) with a reader feeding parsed fields to *_load_fields
    (FieldReader) and a writer collecting what *_save_fields writes
    (FieldWriter), and the two ways in and out of a RedisBloom layout by
    chunks (load_chunks, read_chunks), for either family ("bk_rbloom" or
    "bk_rcuckoo").

Damaged data and library errors raise CorpusError (a ValueError).
Standard library only.
"""
import base64
import ctypes as C
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS_DIR = os.path.normpath(os.path.join(HERE, "..", "golden", "redisbloom"))
CORPUS = os.path.join(CORPUS_DIR, "redisbloom-2.6.28.json.gz")

BK_OK = 0


class CorpusError(ValueError):
    pass


# ---------------------------------------------------------------------------
# The corpus and its items
# ---------------------------------------------------------------------------

def load_corpus(path=CORPUS):
    """The corpus: {"keys": [{key, type, create, added, deleted, ...}],
    "answers": {key: {present, absent, info, scandump, dump, ...}}}."""
    with gzip.open(path) as fh:
        return json.load(fh)


def item_text(key, i):
    """The i-th item added to key, as the corpus script made it."""
    return "%s:%06d:%x" % (key, i, (i * 2654435761) & 0xFFFFFFFF)


def absent_text(i):
    """The i-th item no key was given (answers["absent"][i])."""
    return "absent:%07d" % i


def item(key, i):
    return item_text(key, i).encode()


def absent(i):
    return absent_text(i).encode()


def chunks(ans):
    """A key's SCANDUMP as [(iterator, bytes)], without an end marker
    (iterator 0 with no data)."""
    pairs = [(int(it), base64.b64decode(c)) for it, c in ans["scandump"]]
    return [(it, c) for it, c in pairs if not (it == 0 and not c)]


# ---------------------------------------------------------------------------
# The DUMP payload: RDB module value (type 7), Redis's length encoding
# ---------------------------------------------------------------------------

def lzf_decompress(src, out_len):
    """LZF (liblzf, as Redis compresses RDB strings) of exactly out_len bytes."""
    out = bytearray()
    i = 0
    while i < len(src):
        ctrl = src[i]
        i += 1
        if ctrl < 32:  # a literal run of ctrl + 1 bytes
            out += src[i:i + ctrl + 1]
            i += ctrl + 1
            continue
        length = ctrl >> 5  # a back reference
        if length == 7:
            length += src[i]
            i += 1
        ref = len(out) - ((ctrl & 0x1F) << 8) - src[i] - 1
        i += 1
        if ref < 0:
            raise CorpusError("LZF: reference before the start")
        for _ in range(length + 2):
            out.append(out[ref])
            ref += 1
    if len(out) != out_len:
        raise CorpusError("LZF: %d bytes, expected %d" % (len(out), out_len))
    return bytes(out)


class _Payload:
    """A cursor over an RDB payload."""

    def __init__(self, b):
        self.b = b
        self.i = 0

    def take(self, n):
        if self.i + n > len(self.b):
            raise CorpusError("payload truncated at byte %d" % self.i)
        v = self.b[self.i:self.i + n]
        self.i += n
        return v

    def length(self):
        """(value, special): Redis's RDB length encoding."""
        b0 = self.take(1)[0]
        kind = b0 >> 6
        if kind == 0:
            return b0 & 0x3F, False
        if kind == 1:
            return ((b0 & 0x3F) << 8) | self.take(1)[0], False
        if kind == 3:
            return b0 & 0x3F, True
        if b0 == 0x80:
            return struct.unpack(">I", self.take(4))[0], False
        if b0 == 0x81:
            return struct.unpack(">Q", self.take(8))[0], False
        raise CorpusError("bad RDB length byte %#x at %d" % (b0, self.i - 1))

    def string(self):
        n, special = self.length()
        if not special:
            return bytes(self.take(n))
        if n in (0, 1, 2):  # an integer of 1, 2 or 4 bytes, as text
            width = 1 << n
            return str(int.from_bytes(self.take(width), "little", signed=True)).encode()
        if n == 3:
            clen, _ = self.length()
            ulen, _ = self.length()
            return lzf_decompress(self.take(clen), ulen)
        raise CorpusError("unknown string encoding %d" % n)


def parse_dump(payload):
    """(encver, [(kind, value)]) of a module value's DUMP payload; kind "u"
    (an unsigned, value an int), "d" (a double, value its 8 bytes) or "s"
    (a string, value bytes)."""
    r = _Payload(payload)
    t = r.take(1)[0]
    if t != 7:
        raise CorpusError("DUMP type byte %d, expected 7 (module value v2)" % t)
    module_id, _ = r.length()
    encver = module_id & 0x3FF
    fields = []
    while True:
        op, _ = r.length()
        if op == 0:
            break
        if op in (1, 2):
            v, _ = r.length()
            fields.append(("u", v))
        elif op == 3:
            raise CorpusError("a float field (opcode 3): RedisBloom writes doubles")
        elif op == 4:
            fields.append(("d", bytes(r.take(8))))
        elif op == 5:
            fields.append(("s", r.string()))
        else:
            raise CorpusError("unexpected module opcode %d" % op)
    if len(payload) - r.i != 10:
        raise CorpusError("payload trailer is %d bytes, not 10" % (len(payload) - r.i))
    return encver, fields


# ---------------------------------------------------------------------------
# The library
# ---------------------------------------------------------------------------

U64P = C.POINTER(C.c_uint64)
GET_U = C.CFUNCTYPE(C.c_int, C.c_void_p, U64P)
GET_D = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_double))
GET_S = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_void_p), C.POINTER(C.c_size_t))
PUT_U = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_uint64)
PUT_D = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_double)
PUT_S = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.c_size_t)


class RFields(C.Structure):
    """bk_rfields (include/bloomkit.h)."""
    _fields_ = [("ctx", C.c_void_p), ("get_unsigned", GET_U), ("get_double", GET_D),
                ("get_string", GET_S), ("put_unsigned", PUT_U), ("put_double", PUT_D),
                ("put_string", PUT_S)]


def load_lib(path, signatures):
    """The shared library at path, with {name: (restype, argtypes)} set,
    and bk_errname."""
    lib = C.CDLL(path)
    sig = dict(signatures)
    sig["bk_errname"] = (C.c_char_p, [C.c_int])
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


def err(lib, rc):
    """A library return code as "rc (BK_NAME)"."""
    return "%d (%s)" % (rc, lib.bk_errname(rc).decode() if rc < 0 else "ok")


class FieldReader:
    """Feeds parse_dump's fields, in order, to *_load_fields (pass
    C.byref(reader.rf)); pos is how many were taken."""

    def __init__(self, fields):
        self.fields = fields
        self.pos = 0
        self.keep = None  # the last string handed out: valid until the next call
        self.rf = RFields(None, GET_U(self._get_u), GET_D(self._get_d), GET_S(self._get_s),
                          PUT_U(), PUT_D(), PUT_S())

    def _take(self, kind):
        if self.pos >= len(self.fields) or self.fields[self.pos][0] != kind:
            return None
        self.pos += 1
        return self.fields[self.pos - 1][1]

    def _get_u(self, ctx, out):
        v = self._take("u")
        if v is None:
            return 1
        out[0] = v
        return 0

    def _get_d(self, ctx, out):
        v = self._take("d")
        if v is None:
            return 1
        out[0] = struct.unpack("<d", v)[0]
        return 0

    def _get_s(self, ctx, p, n):
        v = self._take("s")
        if v is None:
            return 1
        self.keep = C.create_string_buffer(v, max(len(v), 1))
        p[0] = C.cast(self.keep, C.c_void_p).value
        n[0] = len(v)
        return 0


class FieldWriter:
    """Collects what *_save_fields writes (pass C.byref(writer.rf)) as
    fields in parse_dump's form."""

    def __init__(self):
        self.fields = []
        self.rf = RFields(None, GET_U(), GET_D(), GET_S(), PUT_U(self._put_u),
                          PUT_D(self._put_d), PUT_S(self._put_s))

    def _put_u(self, ctx, v):
        self.fields.append(("u", v))
        return 0

    def _put_d(self, ctx, v):
        self.fields.append(("d", struct.pack("<d", v)))
        return 0

    def _put_s(self, ctx, p, n):
        self.fields.append(("s", C.string_at(p, n) if n else b""))
        return 0


def load_chunks(lib, family, pairs):
    """A new filter of family ("bk_rbloom", "bk_rcuckoo") made from decoded
    SCANDUMP pairs by <family>_from_header and <family>_load_chunk. Returns
    its handle (a c_void_p; the caller frees it with <family>_free)."""
    it0, hdr = pairs[0]
    if it0 != 1:
        raise CorpusError("first SCANDUMP iterator is %d, not 1" % it0)
    f = C.c_void_p()
    rc = getattr(lib, family + "_from_header")(C.byref(f), hdr, len(hdr))
    if rc != BK_OK:
        raise CorpusError("from_header: " + err(lib, rc))
    load = getattr(lib, family + "_load_chunk")
    for it, data in pairs[1:]:
        rc = load(f, it, data, len(data))
        if rc != BK_OK:
            getattr(lib, family + "_free")(f)
            raise CorpusError("load_chunk(%d, %d bytes): %s" % (it, len(data), err(lib, rc)))
    return f


def read_chunks(lib, family, f):
    """The SCANDUMP pairs of filter f, as <family>_header and <family>_chunk
    give them (the end, iterator 0, not included)."""
    header = getattr(lib, family + "_header")
    chunk = getattr(lib, family + "_chunk")
    n = header(f, None, 0)
    buf = C.create_string_buffer(n)
    if header(f, buf, n) != n:
        raise CorpusError("header size changed")
    pairs = [(1, buf.raw)]
    it = 1
    while True:
        nxt, data, ln = C.c_uint64(), C.c_void_p(), C.c_size_t()
        rc = chunk(f, it, C.byref(nxt), C.byref(data), C.byref(ln))
        if rc != BK_OK:
            raise CorpusError("chunk(%d): %s" % (it, err(lib, rc)))
        if nxt.value == 0:
            if ln.value != 0:
                raise CorpusError("chunk after the last has %d bytes" % ln.value)
            return pairs
        pairs.append((nxt.value, C.string_at(data.value, ln.value)))
        it = nxt.value
