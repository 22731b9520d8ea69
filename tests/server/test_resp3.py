#!/usr/bin/python3
"""RedisBloom's reply types, LOADCHUNK safety and error texts, over raw RESP
(the exact bytes) and redis-cli -3.

1. After HELLO 3: #t/#f for BF.ADD, BF.EXISTS, BF.MADD, BF.MEXISTS,
   BF.INSERT, CF.ADD, CF.ADDNX, CF.INSERT, CF.EXISTS, CF.MEXISTS, CF.DEL
   (also when pipelined BF.ADDs are coalesced); integers for CF.INSERTNX
   and CF.COUNT; maps for BF.INFO / CF.INFO, a one-pair map for
   BF.INFO key FIELD. The same commands in RESP2: :1/:0 and flat arrays.
2. *.LOADCHUNK with a chunk that cannot start a dump (shorter than the
   header, wrong iterator, bad header checksum, bad filter checksum) is an
   error and leaves a live filter exactly as it was.
3. RedisBloom's error texts: a cuckoo filter at its stage limit, a reserve
   too large, CF.INSERT CAPACITY below bucket size x 2 on an existing key,
   BF.RESERVE / CF.RESERVE on the other family's key.

Runs against bloomkit-server, or redis-server + bloomkit.so with
$BLOOMKIT_MODULE (tests/module/test_resp3.py).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Runner, Server, redis_cli, scandump  # noqa: E402
from resp3 import Conn, Err  # noqa: E402

run = Runner("test_resp3")
srv = Server()
r = srv.client()

WRONGTYPE = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"


def exact(c, args, want):
    got = c.raw_reply(*args)
    assert got == want, "%r: %r != %r" % (args, got, want)


def resp3_types():
    r.flushall()
    c = Conn(srv.port)
    hello = c.call("HELLO", "3")
    assert dict(hello)[b"proto"] == 3, hello
    exact(c, ("BF.ADD", "b", "a"), b"#t\r\n")
    exact(c, ("BF.ADD", "b", "a"), b"#f\r\n")
    exact(c, ("BF.EXISTS", "b", "a"), b"#t\r\n")
    exact(c, ("BF.EXISTS", "b", "zz"), b"#f\r\n")
    exact(c, ("BF.EXISTS", "nokey", "a"), b"#f\r\n")
    exact(c, ("BF.MADD", "b", "a", "c"), b"*2\r\n#f\r\n#t\r\n")
    exact(c, ("BF.MEXISTS", "b", "a", "zz"), b"*2\r\n#t\r\n#f\r\n")
    exact(c, ("BF.INSERT", "b", "ITEMS", "d", "a"), b"*2\r\n#t\r\n#f\r\n")
    exact(c, ("BF.CARD", "b"), b":3\r\n")
    exact(c, ("BF.INFO", "b", "CAPACITY"), b"%1\r\n+Capacity\r\n:100\r\n")
    exact(c, ("BF.INFO", "b", "ITEMS"), b"%1\r\n+Number of items inserted\r\n:3\r\n")
    info = c.call("BF.INFO", "b")
    assert [k for k, _ in info] == ["Capacity", "Size", "Number of filters",
                                    "Number of items inserted", "Expansion rate"], info
    # pipelined BF.ADDs on one key are run as one batch: each reply stays a boolean
    c.send(*[("BF.ADD", "p", x) for x in ("a", "b", "a", "c")])
    assert [c.read() for _ in range(4)] == [True, True, False, True]
    c.send(*[("BF.EXISTS", "p", x) for x in ("a", "zz", "c")])
    assert [c.read() for _ in range(3)] == [True, False, True]
    exact(c, ("CF.ADD", "c", "a"), b"#t\r\n")
    exact(c, ("CF.ADDNX", "c", "a"), b"#f\r\n")
    exact(c, ("CF.ADDNX", "c", "b"), b"#t\r\n")
    exact(c, ("CF.INSERT", "c", "ITEMS", "a", "x"), b"*2\r\n#t\r\n#t\r\n")
    exact(c, ("CF.INSERTNX", "c", "ITEMS", "a", "y"), b"*2\r\n:0\r\n:1\r\n")
    exact(c, ("CF.EXISTS", "c", "a"), b"#t\r\n")
    exact(c, ("CF.MEXISTS", "c", "a", "zz"), b"*2\r\n#t\r\n#f\r\n")
    exact(c, ("CF.COUNT", "c", "a"), b":2\r\n")
    exact(c, ("CF.DEL", "c", "a"), b"#t\r\n")
    exact(c, ("CF.DEL", "c", "zz"), b"#f\r\n")
    info = c.call("CF.INFO", "c")
    assert len(info) == 8 and info[0][0] == "Size", info
    # RESP2: integers and flat arrays
    assert c.call("HELLO", "2")
    exact(c, ("BF.ADD", "b", "a"), b":0\r\n")
    exact(c, ("BF.EXISTS", "b", "a"), b":1\r\n")
    exact(c, ("BF.MADD", "b", "a", "e"), b"*2\r\n:0\r\n:1\r\n")
    exact(c, ("BF.INFO", "b", "CAPACITY"), b"*1\r\n:100\r\n")
    assert c.raw_reply("BF.INFO", "b").startswith(b"*10\r\n+Capacity\r\n:100\r\n")
    exact(c, ("CF.DEL", "c", "a"), b":1\r\n")
    exact(c, ("CF.INSERT", "c", "ITEMS", "q"), b"*1\r\n:1\r\n")
    c.close()


def redis_cli_3():
    rc, out = redis_cli(srv.port, "-3", "BF.ADD", "cli3", "x")
    assert rc == 0 and out.strip() == "(true)", out
    rc, out = redis_cli(srv.port, "-3", "BF.EXISTS", "cli3", "y")
    assert rc == 0 and out.strip() == "(false)", out
    rc, out = redis_cli(srv.port, "-3", "BF.INFO", "cli3", "CAPACITY")
    assert rc == 0 and "Capacity" in out and "100" in out, out
    rc, out = redis_cli(srv.port, "BF.ADD", "cli3", "z")
    assert rc == 0 and out.strip() == "1", out


def loadchunk_keeps(fam, create, probe):
    r.flushall()
    r.execute_command(*create.split())
    r.execute_command(fam + ".ADD", "live", "a")
    typ = r.type("live")
    chunks = scandump(r, fam, "live")
    assert len(chunks) == 1 and len(chunks[0][1]) > 56
    it, data = chunks[0]
    bad_header = bytearray(data)
    bad_header[20] ^= 1
    bad_body = bytearray(data)
    bad_body[-9] ^= 0x40
    c = Conn(srv.port)
    for args, text in (((4, b"abcd"), "shorter than the dump header"),
                       ((it + 5, data), "chunk out of order"),
                       ((it, bytes(bad_header)), "checksum"),
                       ((it, bytes(bad_body)), "invalid chunk")):
        got = c.call(fam + ".LOADCHUNK", "live", *args)
        assert isinstance(got, Err) and text in got, (args[0], got)
        assert r.type("live") == typ
        assert r.execute_command(probe, "live", "a") == 1
    # the real chunk still loads
    assert c.call(fam + ".LOADCHUNK", "live", it, data) == "OK"
    assert r.execute_command(probe, "live", "a") == 1
    c.close()


def error_texts():
    r.flushall()
    c = Conn(srv.port)
    assert c.call("CF.RESERVE", "c", "4") == "OK"
    last = None
    for i in range(5000):
        last = c.call("CF.ADD", "c", "item%d" % i)
        if last is not True and last != 1:
            break
    assert last == Err("ERR Maximum expansions reached"), last
    exact(c, ("CF.INSERT", "c", "CAPACITY", "3", "ITEMS", "a"),
          b"-Capacity must be at least (BucketSize * 2)\r\n")
    exact(c, ("CF.INSERTNX", "c", "CAPACITY", "1", "ITEMS", "a"),
          b"-Capacity must be at least (BucketSize * 2)\r\n")
    exact(c, ("BF.RESERVE", "c", "0.01", "100"), WRONGTYPE)
    assert c.call("BF.RESERVE", "b", "0.01", "100") == "OK"
    exact(c, ("CF.RESERVE", "b", "100"), WRONGTYPE)
    exact(c, ("BF.RESERVE", "b", "0.01", "100"), b"-ERR item exists\r\n")
    exact(c, ("BF.RESERVE", "huge", "0.000001", "1000000000000000"),
          b"-ERR Insufficient memory to create filter\r\n")
    exact(c, ("CF.RESERVE", "huge", "1000000000000000"),
          b"-ERR Insufficient memory to create filter\r\n")
    assert r.exists("huge") == 0
    c.close()


run.check("RESP3 booleans and maps; RESP2 unchanged", resp3_types)
run.check("redis-cli -3", redis_cli_3)
run.check("BF.LOADCHUNK keeps a live filter", loadchunk_keeps, "BF",
          "BF.RESERVE live 0.01 1000", "BF.EXISTS")
run.check("CF.LOADCHUNK keeps a live filter", loadchunk_keeps, "CF",
          "CF.RESERVE live 1000", "CF.EXISTS")
run.check("RedisBloom's error texts", error_texts)
r.close()
code = srv.stop()
assert code == 0, srv.log()[-3000:]
run.finish()
