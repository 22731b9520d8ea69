"""resp3.py - a raw RESP2/RESP3 connection for tests that check reply types.

    c = Conn(port)              # a plain socket to 127.0.0.1:port
    c.call("HELLO", "3")        # -> the reply, decoded with its RESP type:
        +s  -> Simple("s")      -e -> Err("e")       :n -> int
        $n  -> bytes            $-1 / *-1 / _ -> None (Null("$"/"*"/"_"))
        *n  -> list             %n -> Map([(k, v), ...])
        #t  -> True / #f False  ,d -> float
    c.send(*cmds) then c.read() for pipelines; c.raw_reply(*args) gives the
    exact bytes of one reply (for checks on the encoding itself).
"""
import socket


class Simple(str):
    pass


class Err(str):
    pass


class Null:
    def __init__(self, kind):
        self.kind = kind      # "$", "*" (RESP2) or "_" (RESP3)

    def __repr__(self):
        return "Null(%r)" % self.kind

    def __eq__(self, other):
        return other is None or (isinstance(other, Null) and other.kind == self.kind)


class Map(list):
    """A RESP3 map as its ordered (key, value) pairs."""

    def as_dict(self):
        return dict(self)


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self.seen = b""       # every byte received (raw_reply)

    def close(self):
        self.sock.close()

    def send(self, *cmds):
        self.sock.sendall(b"".join(encode(*c) for c in cmds))

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed")
        self.buf += chunk
        self.seen += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _bytes(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return Simple(rest.decode())
        if t == b"-":
            return Err(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"#":
            return rest == b"t"
        if t == b",":
            return float(rest)
        if t == b"_":
            return Null("_")
        if t == b"$":
            n = int(rest)
            return Null("$") if n < 0 else self._bytes(n)
        if t == b"*":
            n = int(rest)
            return Null("*") if n < 0 else [self.read() for _ in range(n)]
        if t == b"%":
            return Map((self.read(), self.read()) for _ in range(int(rest)))
        raise ValueError("unexpected reply type %r" % line[:40])

    def call(self, *args):
        self.send(args)
        return self.read()

    def raw_reply(self, *args):
        """The exact bytes of one reply (parsed only to find its end)."""
        self.send(args)
        start = len(self.seen) - len(self.buf)
        self.read()
        return self.seen[start:len(self.seen) - len(self.buf)]
