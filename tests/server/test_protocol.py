#!/usr/bin/python3
"""Protocol abuse over raw sockets: every malformed input gets an error or
a disconnect, never a crash, and another client still gets PONG after each.
"""
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Runner, Server, recv_all  # noqa: E402

srv = Server("--client-output-buffer-limit", "1mb", "--max-inline-len", "64kb",
             "--client-query-buffer-limit", "8mb", unixsocket=True)
run = Runner("test_protocol")
watcher = srv.client()


def alive():
    """Another client gets PONG, and the server process is running."""
    assert srv.proc.poll() is None, "server died:\n" + srv.log()
    assert watcher.ping() is True
    s = srv.raw()
    s.sendall(b"PING\r\n")
    data, _ = recv_all(s, 5, until=lambda d: d.endswith(b"\r\n"))
    s.close()
    assert data == b"+PONG\r\n", data


def expect_error_and_close(payload, text):
    s = srv.raw()
    s.sendall(payload)
    data, eof = recv_all(s, 5)
    s.close()
    assert data.startswith(b"-"), data[:200]
    assert text.encode() in data, (text, data[:200])
    assert eof, "connection not closed after a protocol error"
    alive()


def case(name, payload, text):
    run.check(name, expect_error_and_close, payload, text)


# -- multibulk counts -------------------------------------------------------
case("negative multibulk length", b"*-5\r\n", "Protocol error: invalid multibulk length")
case("null multibulk (*-1)", b"*-1\r\n", "invalid multibulk length")
case("huge multibulk length", b"*99999999999999\r\n", "invalid multibulk length")
case("multibulk above max-args", b"*1048577\r\n", "invalid multibulk length")
case("overflowing multibulk length", b"*99999999999999999999999\r\n",
     "invalid multibulk length")
case("non-numeric multibulk length", b"*abc\r\n", "invalid multibulk length")
case("multibulk with leading plus", b"*+1\r\n", "invalid multibulk length")
case("multibulk length with no end", b"*" + b"1" * 100, "invalid multibulk length")

# -- bulk lengths -------------------------------------------------------------
case("negative bulk length", b"*1\r\n$-3\r\n", "Protocol error: invalid bulk length")
case("huge bulk length", b"*1\r\n$9999999999999\r\n", "invalid bulk length")
case("bulk above proto-max-bulk-len", b"*1\r\n$536870913\r\n", "invalid bulk length")
case("non-numeric bulk length", b"*1\r\n$x1\r\n", "invalid bulk length")
case("empty bulk length", b"*1\r\n$\r\n", "invalid bulk length")
case("missing $", b"*1\r\n+PING\r\n", "Protocol error: expected '$', got '+'")
case("binary byte instead of $", b"*1\r\n\x00PING\r\n", "expected '$', got '?'")
case("bulk without CRLF", b"*1\r\n$4\r\nPINGxx", "Protocol error")

# -- inline -------------------------------------------------------------------
case("unbalanced double quote", b'ECHO "abc\r\n', "Protocol error: unbalanced quotes")
case("unbalanced single quote", b"ECHO 'abc\r\n", "unbalanced quotes")
case("closing quote followed by text", b'ECHO "abc"def\r\n', "unbalanced quotes")
case("too big inline request", b"A" * (70 * 1024), "Protocol error: too big inline request")


def inline_ok():
    s = srv.raw()
    s.sendall(b'PING\r\nECHO "hello world"\r\nECHO \'it\\\'s\'\r\n\r\n'
              b'ECHO "\\x41\\n"\nBF.ADD inl x\r\nBF.EXISTS inl x\r\n')
    want = b"+PONG\r\n$11\r\nhello world\r\n$4\r\nit's\r\n$2\r\nA\n\r\n:1\r\n:1\r\n"
    data, _ = recv_all(s, 5, until=lambda d: len(d) >= len(want))
    s.close()
    assert data == want, data
    alive()


run.check("inline commands (telnet), quotes and escapes", inline_ok)


def unknown_inline():
    s = srv.raw()
    s.sendall(b"NOSUCHCMD a b\r\n")
    data, _ = recv_all(s, 5, until=lambda d: d.endswith(b"\r\n"))
    s.close()
    assert data == b"-ERR unknown command 'NOSUCHCMD', with args beginning with: 'a' 'b' \r\n", data


run.check("unknown command text", unknown_inline)


def unterminated():
    socks = []
    for payload in (b"*2\r\n$3\r\nfoo", b"*3\r\n$6\r\nBF.ADD\r\n", b"*1\r\n$100\r\nab",
                    b"PING", b"*5"):
        s = srv.raw()
        s.sendall(payload)
        socks.append(s)
    time.sleep(0.3)
    for s in socks:
        s.settimeout(0.2)
        try:
            d = s.recv(100)
            assert d == b"", ("reply to an unterminated request", d)
        except socket.timeout:
            pass  # still waiting for the rest: right
    alive()
    # finishing one of them completes the request
    socks[0].sendall(b"\r\n")   # *2 $3 foo CRLF, then needs the second arg
    socks[0].sendall(b"$3\r\nbar\r\n")
    data, _ = recv_all(socks[0], 5, until=lambda d: d.endswith(b"\r\n"))
    assert data.startswith(b"-ERR unknown command 'foo'"), data
    for s in socks:
        s.close()
    alive()


run.check("unterminated requests wait, others are served", unterminated)


def request_split_byte_by_byte():
    s = srv.raw()
    req = b"*3\r\n$6\r\nBF.ADD\r\n$5\r\nsplit\r\n$4\r\nitem\r\n" * 3
    for i in range(len(req)):
        s.sendall(req[i:i + 1])
    data, _ = recv_all(s, 5, until=lambda d: d.count(b"\r\n") >= 3)
    s.close()
    assert data == b":1\r\n:0\r\n:0\r\n", data


run.check("a request arriving one byte at a time", request_split_byte_by_byte)


def garbage():
    rnd = random.Random(1234)
    for i in range(30):
        n = rnd.choice([1, 7, 100, 4096, 65536, 300000])
        payload = bytes(rnd.getrandbits(8) for _ in range(n))
        s = srv.raw()
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        recv_all(s, 5)
        s.close()
    # garbage that looks like RESP
    for i in range(30):
        parts = [b"*", str(rnd.randint(-3, 5)).encode(), b"\r\n"]
        for _ in range(rnd.randint(0, 4)):
            parts += [rnd.choice([b"$", b"*", b":", b"+", b"x"]),
                      str(rnd.randint(-2, 8)).encode(), b"\r\n",
                      bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 10))), b"\r\n"]
        s = srv.raw()
        try:
            s.sendall(b"".join(parts))
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        recv_all(s, 5)
        s.close()
    alive()


run.check("binary garbage", garbage)


def pipelined_10000():
    s = srv.raw(timeout=30)
    reqs = []
    for i in range(10000):
        if i % 3 == 0:
            reqs.append(b"*3\r\n$6\r\nBF.ADD\r\n$4\r\npipe\r\n$%d\r\n%d\r\n" % (len(str(i)), i))
        elif i % 3 == 1:
            reqs.append(b"*3\r\n$9\r\nBF.EXISTS\r\n$4\r\npipe\r\n$%d\r\n%d\r\n"
                        % (len(str(i - 1)), i - 1))
        else:
            reqs.append(b"*1\r\n$4\r\nPING\r\n")
    s.sendall(b"".join(reqs))
    data, _ = recv_all(s, 30, until=lambda d: d.count(b"\r\n") >= 10000)
    s.close()
    lines = data.split(b"\r\n")[:-1]
    assert len(lines) == 10000, len(lines)
    for i, line in enumerate(lines):
        if i % 3 == 0:
            assert line in (b":1", b":0"), (i, line)
        elif i % 3 == 1:
            assert line == b":1", (i, line)   # no false negatives
        else:
            assert line == b"+PONG", (i, line)
    card = watcher.execute_command("BF.CARD", "pipe")
    ones = sum(1 for i, l in enumerate(lines) if i % 3 == 0 and l == b":1")
    assert card == ones, (card, ones)
    alive()


run.check("10,000 pipelined commands, replies in order", pipelined_10000)


def pipelined_mixed_keys():
    # coalescing must not mix keys or commands
    s = srv.raw()
    reqs = b""
    for i in range(200):
        reqs += b"*3\r\n$6\r\nBF.ADD\r\n$2\r\nk%d\r\n$1\r\nx\r\n" % (i % 2)
    reqs += b"*3\r\n$6\r\nbf.add\r\n$2\r\nk0\r\n$1\r\ny\r\n" * 2
    reqs += b"*3\r\n$9\r\nBF.EXISTS\r\n$2\r\nk1\r\n$1\r\ny\r\n"
    s.sendall(reqs)
    data, _ = recv_all(s, 10, until=lambda d: d.count(b"\r\n") >= 203)
    s.close()
    lines = data.split(b"\r\n")[:-1]
    assert lines[:2] == [b":1", b":1"], lines[:4]
    assert all(x == b":0" for x in lines[2:200]), lines[2:200]
    assert lines[200:] == [b":1", b":0", b":0"], lines[200:]


run.check("pipelined adds on alternating keys", pipelined_mixed_keys)


def pipelined_wrongtype_split():
    watcher.execute_command("CF.RESERVE", "cfkey", 1000)
    s = srv.raw()
    s.sendall(b"*3\r\n$6\r\nBF.ADD\r\n$5\r\ncfkey\r\n$1\r\na\r\n" * 3)
    data, _ = recv_all(s, 5, until=lambda d: d.count(b"\r\n") >= 3)
    s.close()
    assert data.count(b"-WRONGTYPE") == 3, data


run.check("pipelined BF.ADD on a wrong type: one error each", pipelined_wrongtype_split)


def pipelined_cf_runs():
    """Runs of CF.ADD / CF.ADDNX / CF.EXISTS on one key are taken as one
    inside a batch: the replies are those of the commands one by one,
    errors included, each counted as a call."""
    def req(*args):
        return b"*%d\r\n" % len(args) + b"".join(
            b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    watcher.execute_command("BF.ADD", "cf-bf", "a")
    before = watcher.info("commandstats")
    calls = lambda cs, name: cs.get("cmdstat_" + name, {}).get("calls", 0)
    failed = lambda cs, name: cs.get("cmdstat_" + name, {}).get("failed_calls", 0)
    reqs = b"".join(req(b"CF.ADD", b"cfrun", b"i%d" % i) for i in range(50))
    reqs += b"".join(req(b"cf.addnx", b"cfrun", x) for x in (b"i1", b"new", b"new"))
    reqs += b"".join(req(b"CF.EXISTS", b"cfrun", x) for x in (b"i7", b"new", b"absent-x"))
    reqs += b"".join(req(b"CF.ADD", b"cf-bf", x) for x in (b"a", b"b"))
    reqs += req(b"CF.ADD", b"cfrun2", b"z") + req(b"CF.ADD", b"cfrun", b"z")
    s = srv.raw()
    s.sendall(reqs)
    data, _ = recv_all(s, 10, until=lambda d: d.count(b"\r\n") >= 60)
    s.close()
    lines = data.split(b"\r\n")[:-1]
    assert lines[:50] == [b":1"] * 50, lines[:50]
    assert lines[50:53] == [b":0", b":1", b":0"], lines[50:53]
    assert lines[53:55] == [b":1", b":1"], lines[53:56]
    assert lines[55] in (b":0", b":1"), lines[55]     # a false positive is allowed
    assert all(l.startswith(b"-WRONGTYPE") for l in lines[56:58]), lines[56:58]
    assert lines[58:] == [b":1", b":1"], lines[58:]
    after = watcher.info("commandstats")
    assert calls(after, "cf.add") - calls(before, "cf.add") == 54, after.get("cmdstat_cf.add")
    assert failed(after, "cf.add") - failed(before, "cf.add") == 2, after.get("cmdstat_cf.add")
    assert calls(after, "cf.addnx") - calls(before, "cf.addnx") == 3
    assert calls(after, "cf.exists") - calls(before, "cf.exists") == 3
    info = watcher.execute_command("CF.INFO", "cfrun")
    fields = dict(zip(info[::2], info[1::2]))
    assert fields[b"Number of items inserted"] == 52, fields


run.check("pipelined CF.ADD / CF.ADDNX / CF.EXISTS runs", pipelined_cf_runs)


def slow_reader():
    """A client that pipelines requests without reading is held back, not
    disconnected: once its unread replies pass half the output limit the
    server stops running its requests and reading from it (its sends then
    block), others are served meanwhile, and when it reads it gets every
    reply, in order."""
    slow = srv.raw(timeout=60)
    n, size = 2000, 60000          # 120 MB of replies against a 1 MB limit
    reqs = b"".join(b"*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n" % (size, (b"%05d" % i) * (size // 5))
                    for i in range(n))
    before = int(watcher.info("stats")["client_output_buffer_limit_disconnections"])
    sent = []

    def sender():
        try:
            slow.sendall(reqs)
            sent.append(len(reqs))
        except OSError as e:
            sent.append(e)

    t = threading.Thread(target=sender)
    t.start()
    time.sleep(2)
    assert not sent, ("the server read 120 MB of requests whose replies were not read", sent)
    for c in watcher.client_list():
        assert int(c["omem"]) <= 1 << 20, c
    alive()
    # now read: every reply arrives, in order
    buf = b""
    for i in range(n):
        want = b"$%d\r\n%s\r\n" % (size, (b"%05d" % i) * (size // 5))
        while len(buf) < len(want):
            chunk = slow.recv(1 << 20)
            assert chunk, "disconnected after %d replies" % i
            buf += chunk
        assert buf[:len(want)] == want, (i, buf[:40])
        buf = buf[len(want):]
    t.join()
    assert sent == [len(reqs)], sent
    slow.close()
    after = int(watcher.info("stats")["client_output_buffer_limit_disconnections"])
    assert after == before, (before, after)
    alive()


run.check("a client that does not read is held back, then gets every reply", slow_reader)


def held_pipeline_then_quit():
    """A pipeline held back by its unread replies and ending in QUIT: every
    reply, then +OK, then the connection closes."""
    size = 60000
    s = srv.raw(timeout=30)
    s.sendall(b"".join(b"*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n" % (size, (b"%05d" % i) * (size // 5))
                       for i in range(100)) + b"*1\r\n$4\r\nQUIT\r\n")
    time.sleep(0.5)   # held meanwhile: 6 MB of replies against the 1 MB limit
    data, eof = recv_all(s, 20)
    s.close()
    want = b"".join(b"$%d\r\n%s\r\n" % (size, (b"%05d" % i) * (size // 5)) for i in range(100))
    assert data == want + b"+OK\r\n", (len(data), data[-40:])
    assert eof
    alive()


run.check("a held pipeline ending in QUIT gets every reply", held_pipeline_then_quit)


def reply_over_limit():
    """One reply larger than client-output-buffer-limit still disconnects
    (a DUMP of a 1.2 MB filter against the 1 MB limit), counted in INFO."""
    watcher.execute_command("BF.RESERVE", "big-dump", "0.01", "1000000")
    before = int(watcher.info("stats")["client_output_buffer_limit_disconnections"])
    s = srv.raw()
    s.sendall(b"*2\r\n$4\r\nDUMP\r\n$8\r\nbig-dump\r\n")
    data, eof = recv_all(s, 10)
    s.close()
    assert eof, "not disconnected"
    assert len(data) < 1200000, len(data)
    assert int(watcher.info("stats")["client_output_buffer_limit_disconnections"]) == before + 1
    watcher.delete("big-dump")
    alive()


run.check("one reply over client-output-buffer-limit disconnects", reply_over_limit)


def query_buffer_limit():
    s = srv.raw()
    # a 9 MB bulk (below proto-max-bulk-len) is above the 8 MB query buffer limit
    try:
        s.sendall(b"*2\r\n$4\r\nECHO\r\n$9437184\r\n")
        chunk = b"y" * 65536
        for _ in range(150):
            s.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data, eof = recv_all(s, 5)
    s.close()
    assert b"query buffer" in data or eof, data[:200]
    alive()


run.check("query buffer limit", query_buffer_limit)


def big_bulk_ok():
    s = srv.raw(timeout=30)
    big = os.urandom(3 << 20)
    # ECHO's reply would pass the 1 MB output limit: add it as an item
    for cmd in (b"BF.ADD", b"BF.EXISTS"):
        s.sendall(b"*3\r\n$%d\r\n%s\r\n$3\r\nbig\r\n$%d\r\n" % (len(cmd), cmd, len(big))
                  + big + b"\r\n")
    data, _ = recv_all(s, 20, until=lambda d: d.count(b"\r\n") >= 2)
    s.close()
    assert data == b":1\r\n:1\r\n", data
    assert watcher.execute_command("BF.EXISTS", "big", big) == 1
    assert watcher.execute_command("BF.EXISTS", "big", big[:-1]) == 0


run.check("a 3 MB binary argument arrives intact", big_bulk_ok)


def unix_socket():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(srv.unixsocket)
    s.sendall(b"*1\r\n$4\r\nPING\r\n*3\r\n$6\r\nBF.ADD\r\n$2\r\nux\r\n$1\r\na\r\n")
    data, _ = recv_all(s, 5, until=lambda d: d.count(b"\r\n") >= 2)
    s.close()
    assert data == b"+PONG\r\n:1\r\n", data


run.check("unix socket", unix_socket)


def resp3():
    s = srv.raw()
    s.sendall(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n")
    data, _ = recv_all(s, 5, until=lambda d: b"modules" in d and d.endswith(b"*0\r\n"))
    assert data.startswith(b"%7\r\n"), data
    s.sendall(b"*2\r\n$6\r\nBF.ADD\r\n$2\r\nr3\r\n"[:-0] if False else
              b"*2\r\n$6\r\nCLIENT\r\n$7\r\nGETNAME\r\n")
    data, _ = recv_all(s, 5, until=lambda d: d.endswith(b"\r\n"))
    assert data == b"_\r\n", data
    s.sendall(b"*2\r\n$5\r\nHELLO\r\n$1\r\n4\r\n")
    data, _ = recv_all(s, 5, until=lambda d: d.endswith(b"\r\n"))
    assert data.startswith(b"-NOPROTO"), data
    s.close()


run.check("RESP3 through HELLO 3", resp3)


def many_connections():
    socks = [srv.raw() for _ in range(200)]
    for s in socks:
        s.sendall(b"PING\r\n")
    for s in socks:
        d, _ = recv_all(s, 5, until=lambda d: d.endswith(b"\r\n"))
        assert d == b"+PONG\r\n", d
        s.close()
    alive()


run.check("200 connections at once", many_connections)


def abrupt_disconnects():
    for i in range(50):
        s = srv.raw()
        s.sendall(b"*3\r\n$6\r\nBF.ADD\r\n$2\r\nab\r\n$1\r\nx\r\n" * 100)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()   # RST with replies pending
    alive()


run.check("clients vanishing mid-pipeline", abrupt_disconnects)

watcher.close()
rc = srv.stop()
run.check("clean exit after all that (sanitizers quiet)", lambda: (_ for _ in ()).throw(
    AssertionError("exit code %d\n%s" % (rc, srv.log()))) if rc != 0 else None)
srv.close()
run.finish()
