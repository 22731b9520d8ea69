"""harness.py - start bloomkit-server for a test and drive it.

    from harness import Server, Runner

    with Server() as srv:             # free port, fresh temp --dir, waits for PING
        r = srv.client()              # redis.Redis (python3-redis)
        r.bf().add("f", "x")
        code = srv.stop()             # SHUTDOWN (SAVE), returns the exit code

The server binary comes from $BLOOMKIT_SERVER (CTest sets it to the build's
own), else build/release/server/bloomkit-server. With $BLOOMKIT_MODULE set
to a bloomkit.so, Server() starts Debian's redis-server ($REDIS_SERVER, else
/usr/bin/redis-server) with that module loaded instead (tests/module/ runs
the same suites that way); the extra flags are then redis-server's. Every server started here
is killed when the test process exits, whatever happens. Run the tests
with Debian's /usr/bin/python3 (it has python3-redis).

Server(*flags, password=None, unixsocket=False, dir=None, threads=2,
       port=None, wait=True): flags are extra "--name value" strings.
  .port, .dir, .unixsocket, .proc, .logfile
  .client(**kw) / .raw() (a connected socket)
  .stop(nosave=False) -> exit code; .terminate() (SIGTERM) -> exit code;
  .kill() (SIGKILL); .restart() (same port and dir); .log() -> text
Runner: .check(name, fn) runs fn, counts pass/fail, prints failures;
  .finish() prints "N passed, M failed" and exits non-zero on failure.
"""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SERVER = os.environ.get("BLOOMKIT_SERVER") or os.path.join(
    ROOT, "build", "release", "server", "bloomkit-server")

MODULE = os.environ.get("BLOOMKIT_MODULE")
REDIS_SERVER = os.environ.get("REDIS_SERVER") or "/usr/bin/redis-server"

_live = []


def _cleanup():
    for s in list(_live):
        try:
            s.close()
        except Exception:
            pass


atexit.register(_cleanup)


def scratch_dir(prefix):
    """A temporary directory removed when the test process exits (kept
    with BKS_KEEP set, like the servers' own directories)."""
    d = tempfile.mkdtemp(prefix=prefix)
    if os.environ.get("BKS_KEEP") is None:
        atexit.register(shutil.rmtree, d, True)
    return d


def flip_bytes(path, offset, mask, length=1):
    """XOR `length` bytes of the file at path, from offset, with mask: a
    damaged file for the tests of what refuses one."""
    with open(path, "r+b") as f:
        f.seek(offset)
        data = f.read(length)
        f.seek(offset)
        f.write(bytes(c ^ mask for c in data))


def proc_status(pid, field):
    """A /proc/PID/status size field (VmRSS, VmSize ...) in bytes."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no %s for pid %d" % (field, pid))


def current(datadir):
    """bloomkit-server's CURRENT in datadir as (snapshot generation, [log
    generations])."""
    snap, logs = 0, []
    with open(os.path.join(datadir, "CURRENT")) as f:
        for line in f:
            w = line.split()
            if w[0] == "snapshot":
                snap = int(w[1])
            elif w[0] == "log":
                logs.append(int(w[1]))
    return snap, logs


def info_persistence(r):
    """INFO persistence as {field: text}, whatever the protocol and the
    client's parsing."""
    text = r.execute_command("INFO", "persistence")
    if isinstance(text, bytes):
        text = text.decode()
    if isinstance(text, dict):
        return {k: str(v) for k, v in text.items()}
    return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)


def children(pid):
    """Child processes of pid, whichever of its threads forked them (a
    snapshot child is forked by a worker thread)."""
    out = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def expect_error(fn, *texts, match="exact"):
    """Run fn, which must fail with a server error; returns its text.
    match "exact": the text is one of texts; "prefix": it starts with one
    of them; "words": it holds every one of them (any case); "contains": it
    holds one of them (as written)."""
    try:
        fn()
    except redis.exceptions.ResponseError as e:
        text = str(e)
        if match == "words":
            for w in texts:
                assert w.lower() in text.lower(), "error %r lacks %r" % (text, w)
        elif match == "prefix":
            assert any(text.startswith(t) for t in texts), \
                "error %r, wanted %r..." % (text, texts)
        elif match == "contains":
            assert any(t in text for t in texts), (texts, text)
        else:
            assert text in texts, "error %r, wanted %r" % (text, texts)
        return text
    raise AssertionError("no error, wanted %r" % (texts,))


# Redis's CRC-64 of DUMP payloads: Jones polynomial, reflected, initial
# value 0, no final xor; table-driven.
_CRC64_POLY = 0x95AC9329AC4BC9B5   # 0xad93d23594c935a9 bit-reversed
_CRC64_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _CRC64_POLY if _c & 1 else _c >> 1
    _CRC64_TABLE.append(_c)


def crc64(data, crc=0):
    for b in data:
        crc = _CRC64_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def reseal(body):
    """A DUMP payload from its body (type byte .. RDB version, 2 bytes):
    body and its CRC-64, little-endian."""
    return body + crc64(body).to_bytes(8, "little")


def raises(text, fn, *args):
    """fn(*args) must fail with a server error whose text holds text
    (redis-py strips a leading "ERR " from error texts)."""
    expect_error(lambda: fn(*args), text, match="contains")


SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
                   "runtime error:")


def end_checked(s):
    """Stop s (kill -9 if still running), drop its log, and fail on any
    sanitizer report the log holds."""
    text = s.log()
    s.close()
    # TSan's reports on a file descriptor number are left out: libuv is not
    # instrumented, so TSan never sees it close a socket, and takes the
    # next file to get that number (a log, here) for a race with the old
    # socket's reads.
    kept = [blk for blk in text.split("WARNING: ThreadSanitizer")[1:]
            if "Location is file descriptor" not in blk.split("SUMMARY")[0]]
    text = text.split("WARNING: ThreadSanitizer")[0] + "".join(
        "WARNING: ThreadSanitizer" + blk for blk in kept)
    at = min((text.find(m) for m in SANITIZER_MARKS if m in text), default=-1)
    assert at < 0, "sanitizer report in the server's log:\n" + text[at:at + 6000]


def rss_bytes(pid):
    return proc_status(pid, "VmRSS")


def server_with_env(env, *flags, **kw):
    """Server(*flags, **kw) started with env added to its environment (for
    it alone: the test's own environment is put back)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return Server(*flags, **kw)
    finally:
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def free_port():
    """A TCP port nobody listens on right now (loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *flags, password=None, unixsocket=False, dir=None,
                 threads=2, port=None, wait=True, bind=None):
        self.flags = list(flags)
        self.password = password
        self.port = port or free_port()
        self.bind = bind
        self._own_dir = dir is None
        self.dir = dir or tempfile.mkdtemp(prefix="bks-test-")
        self.unixsocket = os.path.join(self.dir, "s.sock") if unixsocket else None
        self.threads = threads
        self.proc = None
        self.logfile = os.path.join(self.dir, "server.log") if self._own_dir else \
            tempfile.mktemp(prefix="bks-log-")
        self.start(wait)

    # -- life ------------------------------------------------------------
    def command_line(self):
        if MODULE:
            return self.redis_command_line()
        cmd = [SERVER, "--port", str(self.port), "--dir", self.dir,
               "--threads", str(self.threads)]
        if self.bind:
            cmd += ["--bind", self.bind]
        if self.password:
            cmd += ["--requirepass", self.password]
        if self.unixsocket:
            cmd += ["--unixsocket", self.unixsocket]
        return cmd + self.flags

    def redis_command_line(self):
        """redis-server with bloomkit.so: no snapshots unless asked for,
        DEBUG allowed from loopback (the persistence tests use RELOAD)."""
        cmd = [REDIS_SERVER, "--port", str(self.port), "--dir", self.dir,
               "--loadmodule", MODULE, "--save", "", "--appendonly", "no",
               "--enable-debug-command", "local",
               "--bind", self.bind or "127.0.0.1"]
        if self.password:
            cmd += ["--requirepass", self.password]
        if self.unixsocket:
            cmd += ["--unixsocket", self.unixsocket]
        return cmd + self.flags

    def start(self, wait=True):
        log = open(self.logfile, "ab")
        self.proc = subprocess.Popen(self.command_line(), stdout=log,
                                     stderr=subprocess.STDOUT)
        log.close()
        if self not in _live:
            _live.append(self)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout=20.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("bloomkit-server exited with %d:\n%s"
                                   % (self.proc.returncode, self.log()))
            try:
                c = self.client(socket_timeout=1)
                if c.ping():
                    c.close()
                    return
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                    ConnectionRefusedError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError("bloomkit-server did not answer PING:\n" + self.log())

    def client(self, **kw):
        kw.setdefault("host", self.bind.split()[0] if self.bind else "127.0.0.1")
        kw.setdefault("port", self.port)
        kw.setdefault("socket_timeout", 30)
        if self.password and "password" not in kw:
            kw["password"] = self.password
        return redis.Redis(**kw)

    def raw(self, timeout=10.0):
        """A plain connected socket (for protocol tests)."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def _wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("bloomkit-server did not stop within %.0f s" % timeout)

    def stop(self, nosave=False, timeout=60.0):
        """SHUTDOWN [NOSAVE]; returns the exit code (0 for a clean exit; a
        sanitizer report makes it non-zero)."""
        if self.proc is None or self.proc.poll() is not None:
            return self._finish()
        try:
            c = self.client(socket_timeout=timeout)
            c.execute_command("SHUTDOWN", "NOSAVE" if nosave else "SAVE")
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            pass   # the server closes the connection: expected
        except redis.exceptions.ResponseError:
            self.proc.send_signal(signal.SIGTERM)
        self._wait_exit(timeout)
        return self._finish()

    def terminate(self, timeout=60.0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self._wait_exit(timeout)
        return self._finish()

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        return self._finish()

    def restart(self, wait=True):
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        self.start(wait)

    def _finish(self):
        rc = self.proc.returncode if self.proc else 0
        return rc

    def _remove_dir(self):
        if self._own_dir and os.environ.get("BKS_KEEP") is None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def close(self):
        self.kill()
        if self in _live:
            _live.remove(self)
        self._remove_dir()
        if not self._own_dir:
            try:
                os.unlink(self.logfile)
            except OSError:
                pass

    def log(self):
        try:
            with open(self.logfile, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def redis_cli(port, *args, password=None, stdin=None, timeout=30):
    """Run redis-cli -p PORT args...; returns (exit code, stdout text)."""
    cmd = ["redis-cli", "-p", str(port)]
    if password:
        cmd += ["--no-auth-warning", "-a", password]
    p = subprocess.run(cmd + list(args), input=stdin, capture_output=True,
                       timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace")


class Runner:
    """Counts checks; prints a summary line; exits non-zero on failure."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0

    def check(self, name, fn, *args):
        t0 = time.time()
        try:
            fn(*args)
            self.passed += 1
            print("ok   %-50s %.2fs" % (name, time.time() - t0), flush=True)
        except Exception:
            self.failed += 1
            print("FAIL %s" % name, flush=True)
            traceback.print_exc()
            sys.stdout.flush()

    def check_each(self, fns, make_server):
        """Checks every fn(srv, r) of fns, named by its __name__, on a fresh
        server from make_server() (bloomkit-server or Redis with the
        module), r its client."""
        for fn in fns:
            def one(fn=fn):
                with make_server() as srv:
                    fn(srv, srv.client())
            self.check(fn.__name__, one)

    def finish(self):
        print("%s: %d passed, %d failed" % (self.name, self.passed, self.failed))
        sys.exit(1 if self.failed else 0)


class Workers:
    """Threads each running self.run(t) (t: 0, 1, ...; a subclass's) until
    .stop is set, which leaving the `with` block does; a thread sets .error
    to what went wrong, and the exit then fails with it. .lock is the
    subclass's for what its threads record."""

    join_timeout = 10

    def __init__(self, threads):
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.error = None
        self.threads = [threading.Thread(target=self.run, args=(t,), daemon=True)
                        for t in range(threads)]

    def run(self, t):
        raise NotImplementedError

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(self.join_timeout)
        assert self.error is None, self.error


def fill_kinds(r, prefix=""):
    """A small key of each kind for copy and move tests: <prefix>bf (1500
    items), cf (300), cbf (x once), wf, and ttl (a BF key with a 600 s
    expiry)."""
    r.execute_command("BF.RESERVE", prefix + "bf", "0.01", "2000")
    r.execute_command("BF.MADD", prefix + "bf", *["b%d" % i for i in range(1500)])
    r.execute_command("CF.RESERVE", prefix + "cf", "2000")
    for i in range(300):
        r.execute_command("CF.ADD", prefix + "cf", "c%d" % i)
    r.execute_command("CBF.ADD", prefix + "cbf", "x")
    r.execute_command("WF.RESERVE", prefix + "wf", "0.01", "100", "600000")
    r.execute_command("WF.ADD", prefix + "wf", "w")
    r.execute_command("BF.ADD", prefix + "ttl", "t")
    r.pexpire(prefix + "ttl", 600000)


def bf_copy_by_chunks(bf, src, dst):
    """BF.SCANDUMP src to the end, each chunk BF.LOADCHUNK'ed into dst
    (python-redis's bf() helpers)."""
    chunks, it = [], 0
    while True:
        it, data = bf.scandump(src, it)
        if it == 0:
            break
        chunks.append((it, data))
    for it, data in chunks:
        bf.loadchunk(dst, it, data)


def scandump(r, fam, key, limit=100000):
    """FAM.SCANDUMP of key to the end: its chunks as [(iterator, data)]
    (AssertionError past `limit` chunks)."""
    chunks, it = [], 0
    while len(chunks) <= limit:
        it, data = r.execute_command(fam + ".SCANDUMP", key, it)
        if it == 0:
            return chunks
        chunks.append((it, data))
    raise AssertionError("%s.SCANDUMP %s did not end" % (fam, key))


def loadchunks(r, fam, key, chunks):
    """FAM.LOADCHUNK of each (iterator, data) into key; the replies."""
    return [r.execute_command(fam + ".LOADCHUNK", key, it, data) for it, data in chunks]


def copies_check(r, key, check, helper):
    """key copied by DUMP/RESTORE and by SCANDUMP/LOADCHUNK (helper: the
    client's bf() or cf() object), check(r, copy) on each copy, the copies
    deleted."""
    assert r.restore(key + ":dumped", 0, r.dump(key)) in (b"OK", True)
    check(r, key + ":dumped")
    bf_copy_by_chunks(helper, key, key + ":chunked")
    check(r, key + ":chunked")
    r.delete(key + ":dumped", key + ":chunked")


def restarted(srv, r, save):
    """The server stopped after SAVE (save) or killed with SIGKILL, started
    again; its new client."""
    if save:
        assert r.save()
        srv.stop()
    else:
        srv.kill()
    srv.start()
    return srv.client()


def stop_to_aof(srv):
    """Stop a redis-server (the module's host) without a snapshot and
    remove any dump.rdb: its next start loads the append-only file alone."""
    assert srv.stop(nosave=True) == 0
    rdb = os.path.join(srv.dir, "dump.rdb")
    if os.path.exists(rdb):
        os.unlink(rdb)


def run_steps(steps, cleanup=None):
    """Run fn(srv, r) for each step on one fresh server, in order; a step
    that restarts the server returns its new client. Prints a line per
    step and "N passed, M failed" (a sanitizer report in the server's exit
    status counts as a failure); returns the exit code, 1 when the server
    cannot start. cleanup() runs at the end."""
    try:
        srv = Server()
        srv.client().ping()
    except Exception as e:
        print("harness/server unavailable: %s" % e)
        traceback.print_exc()
        print("0 passed, 1 failed (not run)")
        return 1
    passed = failed = 0
    r = srv.client()
    try:
        for fn in steps:
            try:
                got = fn(srv, r)
                if isinstance(got, redis.Redis):
                    r = got
                passed += 1
                print("ok   %s" % fn.__name__)
            except Exception:
                failed += 1
                print("FAIL %s" % fn.__name__)
                traceback.print_exc()
                r = srv.client()
    finally:
        try:
            if srv.stop() != 0:
                failed += 1
                print("FAIL server exit status (sanitizer report?)")
        except Exception:
            pass
        srv._remove_dir()
        if cleanup is not None:
            cleanup()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def recv_all(sock, timeout=5.0, until=None):
    """Read until EOF, timeout, or until(data) is true. Returns (data, eof)."""
    sock.settimeout(timeout)
    data = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return data, False
        except (ConnectionResetError, BrokenPipeError):
            return data, True
        if not chunk:
            return data, True
        data += chunk
        if until and until(data):
            return data, False
    return data, False
