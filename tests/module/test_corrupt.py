#!/usr/bin/python3
"""Damaged RDB payloads of the module's types are refused, Redis survives.

RESTORE runs a DUMP payload through the type's rdb_load. Each payload
below is a genuine DUMP of one of our keys, damaged, with its CRC64
recomputed so that Redis's own check passes and the damage reaches our
code: a flipped byte inside a filter image, a payload cut short, an
unknown encoding version, a cuckoo payload under the Bloom type, an empty
container, garbage. Each RESTORE must fail with Redis's "Bad data format",
log our reason, and leave the server answering. Finally a damaged
dump.rdb on disk: Redis refuses to start (its rule for an RDB it cannot
read): it exits by itself, not by a signal, after our log line.
"""
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
import redis  # noqa: E402
from harness import Runner, Server, crc64, reseal  # noqa: E402

assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA  # the published check value


def unseal(payload):
    body, crc = payload[:-8], struct.unpack("<Q", payload[-8:])[0]
    assert crc64(body) == crc
    return body


def expect_refused(r, srv, payload, reason):
    try:
        r.restore("victim", 0, payload, replace=True)
    except redis.exceptions.ResponseError as e:
        assert "Bad data format" in str(e), str(e)
    else:
        raise AssertionError("RESTORE accepted a damaged payload")
    assert r.ping()
    assert r.exists("victim") == 0
    assert reason in srv.log(), "log lacks %r:\n%s" % (reason, srv.log()[-2000:])


def _rdb_len(n):
    """RDB length encoding (no special encodings)."""
    if n < 64:
        return bytes([n])
    if n < 16384:
        return bytes([0x40 | n >> 8, n & 0xFF])
    if n < 1 << 32:
        return b"\x80" + struct.pack(">I", n)
    return b"\x81" + struct.pack(">Q", n)


def _read_len(b, i):
    t = b[i] >> 6
    if t == 0:
        return b[i] & 63, i + 1
    if t == 1:
        return (b[i] & 63) << 8 | b[i + 1], i + 2
    assert t == 2 and b[i] in (0x80, 0x81), b[i]
    if b[i] == 0x80:
        return struct.unpack(">I", b[i + 1:i + 5])[0], i + 5
    return struct.unpack(">Q", b[i + 1:i + 9])[0], i + 9


def _pieces(body):
    """The STRING pieces of an encoding-2 payload (uncompressed)."""
    i = 10
    op, i = _read_len(body, i)
    assert op == 2
    total, i = _read_len(body, i)
    out, got = [], 0
    while got < total:
        op, i = _read_len(body, i)
        assert op == 5
        n, i = _read_len(body, i)
        out.append(body[i:i + n])
        i += n
        got += n
    return out


def restore_damaged():
    with Server("--rdbcompression", "no") as srv:
        r = srv.client()
        r.execute_command("BF.RESERVE", "bf", "0.01", "1000")
        r.execute_command("BF.MADD", "bf", "a", "b", "c")
        r.execute_command("CF.ADD", "cf", "a")
        good = r.dump("bf")
        body = unseal(good)
        # the intact payload restores
        r.restore("copy", 0, good)
        assert r.execute_command("BF.EXISTS", "copy", "a") == 1
        assert body[0] == 7 and body[1] == 0x81  # module type 2, 64-bit module id
        at = body.index(b"BKCV")

        flipped = bytearray(body)
        flipped[at + 200] ^= 0x40  # inside the filter image: its checksum fails
        expect_refused(r, srv, reseal(bytes(flipped)), "bloomkit: corrupt bkbloom-- value")

        header = bytearray(body)
        header[at + 17] ^= 0x01    # the container header's filter count
        expect_refused(r, srv, reseal(bytes(header)), "bloomkit: corrupt bkbloom-- value")

        # cut short: the piece's length claims more than there is
        cut = body[:at + 100] + body[-3:]
        expect_refused(r, srv, reseal(cut), "bloomkit: bkbloom-- value truncated")

        # another encoding version (the low 10 bits of the module id): the
        # module writes 2 (a total, then pieces) and reads 1 and 2
        mid = struct.unpack(">Q", body[2:10])[0]
        assert mid & 1023 == 2
        ver = bytearray(body)
        ver[2:10] = struct.pack(">Q", (mid & ~1023) | 3)
        expect_refused(r, srv, reseal(bytes(ver)), "encoding version 3")

        # encoding 2: a declared total of 0 bytes, and a total larger than
        # the pieces that follow (UINT opcode 2; 64-bit length 0x81)
        v2 = body[:10]
        zero = v2 + b"\x02\x00" + b"\x00" + body[-2:]
        expect_refused(r, srv, reseal(zero), "bkbloom-- value declares 0 bytes")
        short = v2 + b"\x02\x0a" + b"\x05\x04abcd" + b"\x00" + body[-2:]
        expect_refused(r, srv, reseal(short), "bloomkit: bkbloom-- value truncated")

        # encoding 1, one string holding the whole container: an intact one
        # (as bloomkit-server's DUMP writes) restores, an empty one does not
        v1 = body[:2] + struct.pack(">Q", (mid & ~1023) | 1)
        total_at = 10
        assert body[total_at] == 2  # UINT opcode, then the total
        container = b"".join(_pieces(body))
        one = v1 + b"\x05" + _rdb_len(len(container)) + container + b"\x00" + body[-2:]
        r.restore("one", 0, reseal(one))
        assert r.execute_command("BF.MEXISTS", "one", "a", "b", "c") == [1, 1, 1]

        # a cuckoo payload under the Bloom type's id
        cbody = unseal(r.dump("cf"))
        swapped = cbody[:2] + body[2:10] + cbody[10:]
        expect_refused(r, srv, reseal(swapped), "bkbloom-- payload holds a bkcuckoo- value")

        # an empty string payload (encoding 1), then garbage of the right length
        empty = v1 + b"\x05\x00" + b"\x00" + body[-2:]
        expect_refused(r, srv, reseal(empty), "bloomkit: corrupt bkbloom-- value")
        garbage = bytearray(body)
        for i in range(at, len(body) - 3):
            garbage[i] = (i * 131) & 0xFF
        expect_refused(r, srv, reseal(bytes(garbage)), "bloomkit: corrupt bkbloom-- value")

        # the server still works and the originals are intact
        assert r.execute_command("BF.MEXISTS", "bf", "a", "b", "c", "zz")[:3] == [1, 1, 1]
        assert r.execute_command("CF.EXISTS", "cf", "a") == 1


def damaged_rdb_file():
    with Server("--rdbcompression", "no") as srv:
        r = srv.client()
        r.execute_command("BF.RESERVE", "bf", "0.01", "1000")
        r.execute_command("BF.MADD", "bf", "a", "b", "c")
        assert r.save()
        assert srv.stop(nosave=True) == 0
        path = os.path.join(srv.dir, "dump.rdb")
        with open(path, "rb") as f:
            data = bytearray(f.read())
        at = data.index(b"BKCV")
        data[at + 200] ^= 0x40
        # keep the file's own CRC valid, so that the damage reaches rdb_load
        data[-8:] = struct.pack("<Q", crc64(bytes(data[:-8])))
        with open(path, "wb") as f:
            f.write(data)
        srv.start(wait=False)
        try:
            rc = srv.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError("redis-server started with a damaged RDB")
        # Redis 7.0 then runs its RDB checker, which knows nothing of
        # module data and ends the process with its own status (0 when the
        # file's structure is sound): what matters is that it exited, by
        # itself, not by a signal, and never served the damaged data
        assert rc >= 0, "redis-server killed by signal %d" % -rc
        assert "module is not able to load" in srv.log()
        log = srv.log()
        assert "bloomkit: corrupt bkbloom-- value" in log, log[-3000:]
        assert "crashed" not in log.lower() and "segmentation" not in log.lower()


def main():
    run = Runner("module corrupt payloads")
    run.check("RESTORE of damaged payloads", restore_damaged)
    run.check("damaged dump.rdb at startup", damaged_rdb_file)
    run.finish()


if __name__ == "__main__":
    main()
