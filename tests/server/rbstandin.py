"""rbstandin.py - a stand-in for a RedisBloom server, for `bloomkit copy`
tests: it serves the corpus keys of tests/golden/redisbloom/ over the
Redis protocol as RedisBloom 2.6.28 would have (SCAN, TYPE MBbloom-- /
MBbloomCF, PTTL -1, DUMP with RedisBloom's payloads, BF/CF.SCANDUMP with
its chunks), and nothing else (CLUSTER SLOTS: "cluster support disabled").

    with StandIn(answers, types) as s:   # s.port
        ...
"""
import base64
import socket
import threading


def _bulk(b):
    if b is None:
        return b"$-1\r\n"
    if isinstance(b, str):
        b = b.encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)


def _array(items):
    return b"*%d\r\n" % len(items) + b"".join(items)


class StandIn:
    def __init__(self, answers, types):
        self.chunks = {k: [(int(it), base64.b64decode(c)) for it, c in a["scandump"]]
                       for k, a in answers.items()}
        self.dumps = {k: base64.b64decode(a["dump"]) for k, a in answers.items()}
        self.types = types   # key -> "bf" / "cf"
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.commands = []   # what was asked, upper-cased names
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stopped = True
        self.sock.close()

    def _accept(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        buf = b""
        f = conn.makefile("rb")
        try:
            while True:
                line = f.readline()
                if not line:
                    return
                assert line[:1] == b"*", line
                argv = []
                for _ in range(int(line[1:])):
                    n = int(f.readline()[1:])
                    argv.append(f.read(n + 2)[:-2])
                conn.sendall(self._answer(argv))
        except (OSError, ValueError, AssertionError):
            return
        finally:
            del buf
            conn.close()

    def _answer(self, argv):
        name = argv[0].decode().upper()
        self.commands.append(name)
        key = argv[1].decode() if len(argv) > 1 else None
        if name == "SCAN":
            if argv[1] != b"0":
                return _array([_bulk("0"), _array([])])
            return _array([_bulk("0"), _array([_bulk(k) for k in sorted(self.types)])])
        if name == "TYPE":
            t = self.types.get(key)
            return b"+%s\r\n" % (b"none" if t is None else
                                 b"MBbloom--" if t == "bf" else b"MBbloomCF")
        if name == "PTTL":
            return b":-1\r\n" if key in self.types else b":-2\r\n"
        if name == "DUMP":
            return _bulk(self.dumps.get(key))
        if name in ("BF.SCANDUMP", "CF.SCANDUMP"):
            chunks = self.chunks.get(key)
            if chunks is None:
                return b"-ERR not found\r\n"
            it = int(argv[2])
            if it == 0:
                nxt = 0
            else:
                nxt = next((i + 1 for i, (c, _) in enumerate(chunks) if c == it), None)
                if nxt is None:
                    return b"-ERR invalid iterator\r\n"
            if nxt >= len(chunks):
                # RedisBloom ends a BF dump with "", a CF dump with nil
                return _array([b":0\r\n", _bulk(None if name[0] == "C" else b"")])
            return _array([b":%d\r\n" % chunks[nxt][0], _bulk(chunks[nxt][1])])
        if name == "CLUSTER":
            return b"-ERR This instance has cluster support disabled\r\n"
        if name == "PING":
            return b"+PONG\r\n"
        return b"-ERR unknown command '%s'\r\n" % argv[0]
