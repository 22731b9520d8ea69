#!/usr/bin/python3
"""Resource limits under abuse (issue 19, parts 1 and 2):

- a server whose descriptor limit is lower than maxclients caps maxclients
  at start-up (with a warning), refuses the clients past it with an error,
  does not spin, and keeps answering the clients it has;
- before AUTH a client may send only small requests (Redis's limits: 10
  arguments, 16 KiB bulks), so unauthenticated clients cannot make the
  server buffer anything large;
- maxmemory-clients caps the query-buffer memory of all clients together.
"""
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import MODULE, Runner, Server, recv_all, rss_bytes  # noqa: E402

run = Runner("test_limits")
if MODULE:
    # these are bloomkit-server's own limits; Redis has its own
    run.finish()

MiB = 1 << 20



def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def ping_raw(s):
    s.sendall(b"PING\r\n")
    data, _ = recv_all(s, 5, until=lambda d: d.endswith(b"\r\n"))
    return data


def flood(srv, clients, header, byte, mib, tolerate=()):
    """clients raw connections each sending header (a request announcing a
    large bulk) then mib MiB of byte; a client the server cuts off (or a
    send that fails with an exception in tolerate) stops sending. The
    connections, open."""
    conns = []
    for _ in range(clients):
        s = srv.raw()
        s.sendall(header)
        conns.append(s)
    chunk = byte * MiB
    for s in conns:
        try:
            for _ in range(mib):
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError) + tuple(tolerate):
            pass
    return conns


class LimitedServer(Server):
    """bloomkit-server started under prlimit with a low RLIMIT_NOFILE."""

    def __init__(self, nofile, *flags, **kw):
        self.nofile = nofile
        Server.__init__(self, *flags, **kw)

    def command_line(self):
        return ["prlimit", "--nofile=%d:%d" % (self.nofile, self.nofile), "--"] + \
            Server.command_line(self)


# -- 1. descriptors -------------------------------------------------------------
def descriptor_flood():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    nofile = 128
    srv = LimitedServer(nofile, threads=2)
    try:
        log = srv.log() if hasattr(srv, "log") else ""
        assert "maxclients reduced to" in log, log[-2000:]
        # the cap: 128 descriptors less the reserve (32 + 4 per worker)
        cap = nofile - (32 + 4 * 2)
        keeper = srv.raw()
        assert ping_raw(keeper) == b"+PONG\r\n"
        socks, refused, served = [], 0, 0
        for _ in range(3 * nofile):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            socks.append(s)
        for s in socks:
            data = ping_raw(s)
            if data == b"+PONG\r\n":
                served += 1
            elif b"max number of clients reached" in data:
                refused += 1
        assert served + refused == len(socks), (served, refused, len(socks))
        # the keeper is one of the cap's clients (and a connection the
        # harness opened may not be closed on the server's side yet)
        assert cap - 3 <= served <= cap - 1, (served, cap)
        assert refused == len(socks) - served
        # no busy loop while the flood holds its connections
        c0 = cpu_seconds(srv.proc.pid)
        time.sleep(1.0)
        busy = cpu_seconds(srv.proc.pid) - c0
        assert busy < 0.3, "server used %.2f s of CPU in 1 s while idle" % busy
        # existing clients are answered at once
        t0 = time.time()
        assert ping_raw(keeper) == b"+PONG\r\n"
        assert time.time() - t0 < 1.0
        for s in socks:
            s.close()
        # once they are gone, new clients are served again
        deadline = time.time() + 10
        while True:
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            data = ping_raw(s)
            s.close()
            if data == b"+PONG\r\n":
                break
            assert time.time() < deadline, data
            time.sleep(0.1)
        keeper.close()
        assert srv.stop() == 0
    finally:
        srv.kill()


run.check("descriptor limit: maxclients capped, flood refused, no spin", descriptor_flood)


# -- 2. unauthenticated clients ---------------------------------------------------
def unauthenticated_limits():
    srv = Server(password="sesame")
    try:
        base = rss_bytes(srv.proc.pid)
        # a huge AUTH argument is refused at its header, before any body;
        # so is a request of too many arguments
        for request, error in ((b"*2\r\n$4\r\nAUTH\r\n$536870912\r\n",
                                b"unauthenticated bulk length"),
                               (b"*11\r\n", b"unauthenticated multibulk length")):
            s = srv.raw()
            s.sendall(request)
            data, eof = recv_all(s, 5)
            assert error in data, data
            assert eof
            s.close()
        # six clients pushing large bodies cannot make the server hold them
        conns = flood(srv, 6, b"*2\r\n$4\r\nAUTH\r\n$100663296\r\n", b"x", 16)
        time.sleep(0.3)
        grown = rss_bytes(srv.proc.pid) - base
        assert grown < 32 * MiB, "RSS grew by %d MiB" % (grown // MiB)
        for s in conns:
            s.close()
        # small requests before AUTH still get NOAUTH, and AUTH followed in
        # the same packet by a large request works: AUTH is applied first
        s = srv.raw()
        key = b"k" * 100000
        req = b"*2\r\n$4\r\nAUTH\r\n$6\r\nsesame\r\n" + \
              b"*3\r\n$6\r\nBF.ADD\r\n$1\r\nf\r\n$%d\r\n%s\r\n" % (len(key), key)
        s.sendall(req)
        data, _ = recv_all(s, 5, until=lambda d: d.count(b"\r\n") >= 2)
        assert data == b"+OK\r\n:1\r\n", data[:200]
        s.close()
        assert srv.client().execute_command("BF.EXISTS", "f", key) == 1
        assert srv.stop() == 0
    finally:
        srv.kill()


run.check("unauthenticated clients: small requests only", unauthenticated_limits)


# -- 3. all clients' buffers ---------------------------------------------------------
def clients_memory_cap():
    srv = Server("--maxmemory-clients", "64mb")
    try:
        base = rss_bytes(srv.proc.pid)
        conns = flood(srv, 12, b"*3\r\n$6\r\nBF.ADD\r\n$1\r\nf\r\n$67108864\r\n", b"y", 24,
                      tolerate=(socket.timeout,))
        time.sleep(0.5)
        # what the server holds for clients: 12 x 24 MiB were sent, the cap
        # is 64 MiB (each client may also hold one read chunk of 16 KiB)
        held = srv.client().info("memory")["mem_clients_normal"]
        assert held <= 64 * MiB + 13 * 16384, "clients hold %d bytes" % held
        if not os.environ.get("BKS_SANITIZED"):
            # ASan's quarantine keeps freed buffers in RSS: only measured
            # in the optimised build
            grown = rss_bytes(srv.proc.pid) - base
            assert grown < 128 * MiB, "RSS grew by %d MiB with a 64 MiB cap" % (grown // MiB)
        closed = 0
        for s in conns:
            data, eof = recv_all(s, 0.5)
            if b"maxmemory-clients" in data:
                closed += 1
            s.close()
        assert closed >= 1, "no client was told about maxmemory-clients"
        # the server still serves, and a request after the flood works
        r = srv.client()
        assert r.execute_command("BF.ADD", "g", "x") == 1
        assert srv.stop() == 0
    finally:
        srv.kill()


run.check("maxmemory-clients caps all clients' buffers", clients_memory_cap)


def unixsocket_permissions():
    srv = Server("--unixsocketperm", "700", unixsocket=True)
    try:
        mode = os.stat(srv.unixsocket).st_mode & 0o777
        assert mode == 0o700, oct(mode)
        assert srv.stop() == 0
    finally:
        srv.kill()
    srv = Server("--unixsocketperm", "9x", unixsocket=True, wait=False)
    try:
        rc = srv.proc.wait(timeout=20)
        assert rc != 0
        assert "not an octal mode" in srv.log(), srv.log()[-500:]
    finally:
        srv.kill()


run.check("unixsocketperm sets the socket's mode", unixsocket_permissions)

run.finish()
