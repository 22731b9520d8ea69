#!/usr/bin/python3
"""restore_seeds.py - the seed corpus of fuzz_restore (fuzz/corpus/restore).

Usage: fuzz/restore_seeds.py PORT OUTDIR

Creates keys of every kind in a running bloomkit-server on 127.0.0.1:PORT
(small ones: the corpus stays small), saves each key's DUMP payload as it
is, and rewrites some of them the ways Redis and the module write
payloads that this server's DUMP never does:
  - the string LZF-compressed (Redis compresses strings over 20 bytes);
  - the module's streamed form (encoding version 2: a UINT total, then
    string pieces, some of them LZF-compressed);
  - a piece stored as an RDB integer string (refused by the container,
    but it reaches that decoder);
each with its CRC-64 recomputed. Needs python3-redis (Debian's).
"""
import os
import sys

import redis

# Redis's CRC-64 of DUMP payloads, from the server tests' harness
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "tests", "server"))
from harness import reseal  # noqa: E402


# ---- RDB length encoding ---------------------------------------------------
def put_len(v):
    if v < 64:
        return bytes([v])
    if v < 16384:
        return bytes([0x40 | (v >> 8), v & 0xFF])
    if v <= 0xFFFFFFFF:
        return b"\x80" + v.to_bytes(4, "big")
    return b"\x81" + v.to_bytes(8, "big")


def get_len(p, i):
    b = p[i]
    kind = b >> 6
    if kind == 0:
        return b & 0x3F, i + 1
    if kind == 1:
        return (b & 0x3F) << 8 | p[i + 1], i + 2
    if b == 0x80:
        return int.from_bytes(p[i + 1:i + 5], "big"), i + 5
    if b == 0x81:
        return int.from_bytes(p[i + 1:i + 9], "big"), i + 9
    raise ValueError("special encoding where a length was expected")


# ---- LZF compression (the format lzf_decode in server/dump_codec.c reads) --
def lzf_compress(data):
    """Greedy: a back reference (3..264 bytes, distance 1..8192) when the
    next 3 bytes were seen, else literal runs of up to 32 bytes."""
    out = bytearray()
    lit = bytearray()
    last = {}
    i = 0
    n = len(data)

    def flush():
        while lit:
            run = lit[:32]
            out.append(len(run) - 1)
            out.extend(run)
            del lit[:32]

    while i < n:
        ref = None
        if i + 3 <= n:
            key = bytes(data[i:i + 3])
            j = last.get(key)
            last[key] = i
            if j is not None and i - j <= 8192:
                ref = j
        if ref is None:
            lit.append(data[i])
            i += 1
            continue
        length = 3
        while i + length < n and length < 264 and data[ref + length] == data[i + length]:
            length += 1
        flush()
        off = i - ref - 1
        code = length - 2
        if code < 7:
            out.append(code << 5 | off >> 8)
        else:
            out.append(7 << 5 | off >> 8)
            out.append(code - 7)
        out.append(off & 0xFF)
        i += length
    flush()
    return bytes(out)


def lzf_string(data):
    comp = lzf_compress(data)
    return b"\xc3" + put_len(len(comp)) + put_len(len(data)) + comp


def plain_string(data):
    return put_len(len(data)) + data


# ---- payloads ---------------------------------------------------------------
def split_dump(p):
    """(module type id, container) of one of this server's DUMP payloads."""
    assert p[0] == 7
    type_id, i = get_len(p, 1)
    opcode, i = get_len(p, i)
    assert opcode == 5
    n, i = get_len(p, i)
    data = p[i:i + n]
    assert p[i + n] == 0 and len(p) == i + n + 1 + 10
    return type_id, data


def seal(body, version=10):
    return reseal(body + version.to_bytes(2, "little"))


def one_string(type_id, string):
    return seal(b"\x07" + put_len(type_id) + b"\x05" + string + b"\x00")


def pieces(type_id, data, cut, compress_every=2):
    """Encoding version 2: UINT total, then STRING pieces of cut bytes."""
    type_id = (type_id & ~1023) | 2
    body = b"\x07" + put_len(type_id) + b"\x02" + put_len(len(data))
    for k, at in enumerate(range(0, len(data), cut)):
        piece = data[at:at + cut]
        body += b"\x05" + (lzf_string(piece) if k % compress_every == 0 and len(piece) > 20
                           else plain_string(piece))
    return seal(body + b"\x00")


def main():
    port, outdir = int(sys.argv[1]), sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    r = redis.Redis(port=port)
    r.flushall()
    setup = [
        ["BF.RESERVE", "bf", "0.01", "50"],
        ["BF.ADD", "bf", "a"], ["BF.ADD", "bf", "b"],
        ["BF.RESERVE", "bf-grown", "0.1", "8", "EXPANSION", "2"],
        *[["BF.ADD", "bf-grown", "item-%d" % i] for i in range(40)],
        ["BF.RESERVE", "bf-empty", "0.01", "20"],
        ["CF.RESERVE", "cf", "64"],
        ["CF.ADD", "cf", "x"], ["CF.ADD", "cf", "x"], ["CF.DEL", "cf", "x"],
        ["CF.RESERVE", "cf-grown", "8", "BUCKETSIZE", "2", "EXPANSION", "1"],
        *[["CF.ADD", "cf-grown", "c-%d" % i] for i in range(40)],
        ["CBF.RESERVE", "cbf", "0.01", "50"],
        ["CBF.ADD", "cbf", "k"], ["CBF.ADD", "cbf", "k"],
        ["CBF.RESERVE", "cbf8", "0.05", "30", "COUNTERBITS", "8"],
        ["CBF.ADD", "cbf8", "q"],
        ["WF.RESERVE", "wf", "0.05", "40", "60000"],
        ["WF.ADD", "wf", "w"],
        ["SF.BUILD", "sf", "ITEMS", "s1", "s2", "s3", "s4"],
        ["SF.BUILDMAP", "sfmap", "ITEMS", "m1", "1", "m2", "2", "m3", "3"],
        ["RS.ADD", "rs", "r1", "r2", "r3"],
        ["RS.ADD", "rs-one", "only"],
    ]
    for cmd in setup:
        try:
            r.execute_command(*cmd)
        except redis.ResponseError as e:
            sys.exit("restore_seeds: %s: %s" % (" ".join(cmd), e))
    written = 0

    def save(name, payload):
        nonlocal written
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(payload)
        written += 1

    for key in sorted(k.decode() for k in r.keys("*")):
        dump = r.dump(key)
        save("dump-" + key, dump)
        type_id, data = split_dump(dump)
        assert one_string(type_id, plain_string(data)) == dump
        if key in ("bf", "cf", "cbf", "sfmap", "rs"):
            save("lzf-" + key, one_string(type_id, lzf_string(data)))
        if key in ("bf", "cf-grown", "rs"):
            save("pieces-" + key, pieces(type_id, data, 1 + len(data) // 3))
    # an RDB integer string where the container is expected, and version 11
    type_id, _ = split_dump(r.dump("bf"))
    save("int-string", one_string(type_id, b"\xc2\x01\x02\x03\x04"))
    save("version-11", seal(split_dump_body(r.dump("rs-one")), 11))
    print("restore_seeds: %d payloads in %s" % (written, outdir))


def split_dump_body(p):
    return p[:-10]


if __name__ == "__main__":
    main()
