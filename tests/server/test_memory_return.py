#!/usr/bin/python3
"""Memory given back after large requests and replies (issue 32).

A client sends one large request (BF.MADD with items of 32 MiB, 512 MiB in
all), or reads one large reply (DUMP of a ~220 MiB filter), and then stays
connected and idle. Within a few seconds the server's RSS must be back
within 64 MiB of used_memory: the query buffer, the log's append buffer
and the reply buffers are freed, and the allocator returns the pages
(server/memtrim.c). Before the fix RSS stayed 512 MiB (request: the log's
append buffer) and 223 MiB (reply: the client's reply buffer) above it.

Under the sanitizers ($BKS_SANITIZED) the sizes are scaled down and RSS
is not asserted (their allocators keep freed memory in quarantine); the
traffic still runs and the clients must still work.
"""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import MODULE, Runner, Server, recv_all, rss_bytes  # noqa: E402

run = Runner("test_memory_return")
if MODULE:
    # bloomkit-server's own buffers and allocator; Redis has its own
    run.finish()

MiB = 1 << 20
SANITIZED = os.environ.get("BKS_SANITIZED") is not None
ITEM = (4 if SANITIZED else 32) * MiB      # bytes per BF.MADD item
ITEMS = 16                                 # 64 MiB / 512 MiB in one request
CAPACITY = 20_000_000 if SANITIZED else 170_000_000   # ~26 MiB / ~223 MiB filter
SLACK = 64 * MiB                           # RSS allowed above used_memory
WAIT = 5.0                                 # seconds the server has to get there



def recv_reply(s, timeout=120.0):
    """One whole reply: a bulk string, an array of integers (counted by its
    header), or a line."""
    s.settimeout(timeout)
    data = bytearray()
    want = None   # total length, once the header says it
    while want is None or len(data) < want:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise AssertionError("the server closed the connection")
        data += chunk
        if want is None and b"\r\n" in data:
            end = data.index(b"\r\n") + 2
            if data[:1] == b"$":
                want = end + max(int(data[1:end - 2]), 0) + 2
            elif data[:1] != b"*":
                want = end
        if data[:1] == b"*" and data.count(b"\r\n") > int(data[1:data.index(b"\r\n")]):
            want = len(data)
    return bytes(data)


def settles(srv, r, what):
    """RSS falls to within SLACK of used_memory within WAIT seconds; the
    idle clients stay connected meanwhile."""
    deadline = time.time() + WAIT
    samples = []
    while True:
        used = int(r.info("memory")["used_memory"])
        rss = rss_bytes(srv.proc.pid)
        samples.append("%d/%d" % (rss // MiB, used // MiB))
        if SANITIZED or rss <= used + SLACK or time.time() > deadline:
            break
        time.sleep(0.25)
    if not SANITIZED:
        assert rss <= used + SLACK, (
            "%s: RSS %d MiB stays more than %d MiB above used_memory %d MiB "
            "(RSS/used MiB every 0.25 s: %s)"
            % (what, rss // MiB, SLACK // MiB, used // MiB, " ".join(samples)))


def still_works(s, key):
    """The idle client is still connected and served."""
    s.sendall(b"*1\r\n$4\r\nPING\r\n")
    data, _ = recv_all(s, 10, until=lambda d: d.endswith(b"\r\n"))
    assert data == b"+PONG\r\n", data
    s.sendall(b"*2\r\n$6\r\nEXISTS\r\n$%d\r\n%s\r\n" % (len(key), key))
    data, _ = recv_all(s, 10, until=lambda d: d.endswith(b"\r\n"))
    assert data == b":1\r\n", data


def big_request():
    with Server() as srv:
        r = srv.client()
        s = srv.raw(timeout=120)
        s.sendall(b"*%d\r\n$7\r\nBF.MADD\r\n$3\r\nbig\r\n" % (ITEMS + 2))
        for i in range(ITEMS):
            s.sendall(b"$%d\r\n" % ITEM)
            s.sendall(bytes([ord("a") + i]) * ITEM)
            s.sendall(b"\r\n")
        reply = recv_reply(s)
        assert reply == b"*%d\r\n" % ITEMS + b":1\r\n" * ITEMS, reply[:80]
        settles(srv, r, "after a %d MiB request" % (ITEMS * ITEM // MiB))
        still_works(s, b"big")
        s.close()
        assert srv.stop(nosave=True) == 0


def big_reply():
    with Server() as srv:
        r = srv.client()
        assert r.execute_command("BF.RESERVE", "huge", "0.01", str(CAPACITY)) == b"OK"
        s = srv.raw(timeout=120)
        s.sendall(b"*2\r\n$4\r\nDUMP\r\n$4\r\nhuge\r\n")
        reply = recv_reply(s)
        assert reply[:1] == b"$" and len(reply) > CAPACITY, reply[:80]
        del reply
        settles(srv, r, "after a DUMP reply read by an idle client")
        still_works(s, b"huge")
        s.close()
        assert srv.stop(nosave=True) == 0


run.check("a large request: RSS back near used_memory, client idle", big_request)
run.check("a large reply: RSS back near used_memory, client idle", big_reply)

run.finish()
