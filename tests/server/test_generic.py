#!/usr/bin/python3
"""The host commands, auth, protected mode, limits, expiry, config, and
redis-cli against bloomkit-server."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
from harness import SERVER, Runner, Server, raises, recv_all, redis_cli  # noqa: E402

run = Runner("test_generic")
srv = Server()
r = srv.client()
rd = srv.client(decode_responses=True)


def cmd(*args, client=None):
    """A command's raw reply, without redis-py's response callbacks."""
    c = client or r
    conn = c.connection_pool.get_connection("_")
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        c.connection_pool.release(conn)


# -- connection ---------------------------------------------------------------
def t_ping_echo():
    assert r.ping() is True
    assert cmd("PING") == b"PONG"
    assert cmd("PING", "hi") == b"hi"
    assert r.echo("bin\x00ary") == b"bin\x00ary"
    raises("wrong number of arguments for 'echo' command", r.execute_command, "ECHO")
    raises("wrong number of arguments for 'ping' command", r.execute_command, "PING", 1, 2)


def t_unknown():
    raises("unknown command 'NOPE', with args beginning with: 'a' ", cmd, "NOPE", "a")
    s = srv.raw()
    s.sendall(b"NOPE a\r\nBF.ADD k\r\n")
    data, _ = recv_all(s, 5, until=lambda d: d.count(b"\r\n") >= 2)
    s.close()
    assert data == (b"-ERR unknown command 'NOPE', with args beginning with: 'a' \r\n"
                    b"-ERR wrong number of arguments for 'bf.add' command\r\n"), data
    raises("wrong number of arguments for 'bf.add' command", r.execute_command, "BF.ADD", "k")
    raises("wrong number of arguments for 'get' command" if False else
           "wrong number of arguments for 'type' command", r.execute_command, "TYPE")


def t_client():
    cid = r.client_id()
    assert isinstance(cid, int) and cid > 0
    assert cmd("CLIENT", "GETNAME") is None
    assert r.client_setname("tester") is True
    assert cmd("CLIENT", "GETNAME") == b"tester"
    raises("Client names cannot contain spaces", r.execute_command, "CLIENT", "SETNAME", "a b")
    assert b"name=tester" in r.execute_command("CLIENT", "LIST")
    raises("unknown subcommand", r.execute_command, "CLIENT", "NOPE")


def t_select():
    assert cmd("SELECT", 0) == b"OK"
    raises("DB index is out of range", r.execute_command, "SELECT", 1)
    raises("value is not an integer", r.execute_command, "SELECT", "x")


def t_hello():
    h = cmd("HELLO")
    d = dict(zip(h[::2], h[1::2]))
    assert d[b"proto"] == 2 and d[b"mode"] == b"standalone", d
    h = cmd("HELLO", 2, "SETNAME", "hello-name")
    assert cmd("CLIENT", "GETNAME") == b"hello-name"
    raises("NOPROTO", r.execute_command, "HELLO", 4)


def t_command():
    n = cmd("COMMAND", "COUNT")
    assert n >= 60, n
    lst = cmd("COMMAND")
    assert len(lst) == n
    names = {e[0] for e in lst}
    for want in (b"bf.add", b"cf.add", b"ping", b"expire", b"pexpireat", b"shutdown"):
        assert want in names, want
    info = cmd("COMMAND", "INFO", "bf.add", "nosuch")
    assert info[0][0] == b"bf.add" and info[0][1] == 3 and info[1] is None, info
    docs = cmd("COMMAND", "DOCS", "bf.add")
    assert docs[0] == b"bf.add", docs
    d = dict(zip(docs[1][::2], docs[1][1::2]))
    assert b"summary" in d and d[b"group"] == b"bf", d
    alldocs = cmd("COMMAND", "DOCS")
    assert len(alldocs) == 2 * n


def t_info():
    info = r.info()
    assert "redis_version" in info and "bloomkit_version" in info, info
    assert info["connected_clients"] >= 1
    assert "used_memory" in r.info("memory")
    assert list(r.info("keyspace").keys()) in ([], ["db0"])


# -- keyspace -----------------------------------------------------------------
def t_keys_types():
    r.flushall()
    assert r.dbsize() == 0
    r.execute_command("BF.ADD", "bf:1", "x")
    r.execute_command("BF.ADD", "bf:2", "x")
    r.execute_command("CF.ADD", "cf:1", "x")
    r.execute_command("BF.ADD", "other", "x")
    assert r.dbsize() == 4
    assert r.type("bf:1") == b"bkbloom--"
    assert r.type("cf:1") == b"bkcuckoo-"
    assert r.type("missing") == b"none"
    assert sorted(r.keys("*")) == [b"bf:1", b"bf:2", b"cf:1", b"other"]
    assert sorted(r.keys("bf:*")) == [b"bf:1", b"bf:2"]
    assert sorted(r.keys("?f:1")) == [b"bf:1", b"cf:1"]
    assert sorted(r.keys("bf:[12]")) == [b"bf:1", b"bf:2"]
    assert sorted(r.keys("bf:[^1]")) == [b"bf:2"]
    assert r.keys("nomatch*") == []
    assert r.exists("bf:1", "cf:1", "missing", "bf:1") == 3
    assert sorted(r.scan_iter(match="*:1", count=2)) == [b"bf:1", b"cf:1"]
    assert sorted(r.scan_iter(_type="bkcuckoo-")) == [b"cf:1"]
    raises("invalid cursor", r.execute_command, "SCAN", "x")
    raises("syntax error", r.execute_command, "SCAN", "0", "BOGUS", "1")


def t_scan_many():
    r.flushall()
    p = r.pipeline(transaction=False)
    # (creating a filter costs the library ~10 ms today: keep this modest)
    for i in range(400):
        p.execute_command("BF.ADD", "many:%d" % i, "x")
    p.execute()
    seen = set()
    cursor, calls = 0, 0
    while True:
        cursor, keys = r.scan(cursor, count=100)
        seen.update(keys)
        calls += 1
        if cursor == 0:
            break
        assert calls < 10000
    assert len(seen) == 400, len(seen)


def t_del_unlink():
    r.flushall()
    r.execute_command("BF.ADD", "a", "x")
    r.execute_command("BF.ADD", "b", "x")
    r.execute_command("BF.ADD", "c", "x")
    assert r.delete("a", "b", "zz") == 2
    assert r.unlink("c", "c") == 1
    assert r.dbsize() == 0
    assert r.execute_command("BF.EXISTS", "a", "x") == 0


def t_rename():
    r.flushall()
    r.execute_command("BF.ADD", "src", "item")
    assert r.rename("src", "dst") is True
    assert r.exists("src") == 0
    assert r.execute_command("BF.EXISTS", "dst", "item") == 1
    raises("no such key", r.rename, "src", "x")
    r.execute_command("CF.ADD", "other", "y")
    r.rename("dst", "other")      # overwrites
    assert r.type("other") == b"bkbloom--"
    assert r.execute_command("BF.EXISTS", "other", "item") == 1
    r.execute_command("BF.ADD", "n1", "x")
    assert r.execute_command("RENAMENX", "n1", "other") == 0
    assert r.execute_command("RENAMENX", "n1", "n2") == 1
    r.expire("n2", 100)
    r.rename("n2", "n3")
    assert 95 <= r.ttl("n3") <= 100


def t_expire():
    r.flushall()
    r.execute_command("BF.ADD", "e1", "x")
    r.execute_command("BF.ADD", "e2", "x")
    r.execute_command("BF.ADD", "e3", "x")
    assert r.ttl("e1") == -1 and r.pttl("e1") == -1
    assert r.ttl("missing") == -2 and r.pttl("missing") == -2
    assert r.pexpire("e1", 300) is True
    assert r.expire("e2", 1) is True
    assert r.expire("missing", 10) is False
    assert 0 < r.pttl("e1") <= 300
    assert r.expire("e3", 1) is True
    assert r.persist("e3") is True
    assert r.persist("e3") is False
    assert r.ttl("e3") == -1
    time.sleep(0.45)
    assert r.exists("e1") == 0, "PEXPIRE 300 ms: key still there after 450 ms"
    assert r.execute_command("BF.EXISTS", "e1", "x") == 0
    assert r.exists("e2") == 1
    time.sleep(0.75)
    assert r.exists("e2") == 0
    assert r.exists("e3") == 1
    # active expiry: nobody touches the key, DBSIZE drops by itself
    r.execute_command("BF.ADD", "e4", "x")
    r.pexpire("e4", 100)
    deadline = time.time() + 3
    while time.time() < deadline and r.dbsize() != 1:
        time.sleep(0.05)
    assert r.dbsize() == 1, r.keys("*")
    # options, past times, errors
    assert r.execute_command("EXPIRE", "e3", 100, "NX") == 1
    assert r.execute_command("EXPIRE", "e3", 50, "NX") == 0
    assert r.execute_command("EXPIRE", "e3", 50, "GT") == 0
    assert r.execute_command("EXPIRE", "e3", 200, "GT") == 1
    assert r.execute_command("EXPIREAT", "e3", int(time.time()) + 1000) == 1
    assert 990 <= r.ttl("e3") <= 1000
    assert r.execute_command("PEXPIREAT", "e3", 1) == 1     # in the past: deleted
    assert r.exists("e3") == 0
    raises("value is not an integer", r.execute_command, "EXPIRE", "e3", "soon")
    raises("invalid expire time in 'expire' command", r.execute_command, "EXPIRE", "e2",
           "9223372036854775807")
    # a re-created key has no expiry
    r.execute_command("BF.ADD", "e1", "y")
    assert r.ttl("e1") == -1


def t_flushall():
    r.execute_command("BF.ADD", "f1", "x")
    assert r.flushall() is True
    assert r.dbsize() == 0
    raises("syntax error", r.execute_command, "FLUSHALL", "NOW")


def t_config_get():
    c = rd.config_get("port")
    assert c == {"port": str(srv.port)}, c
    assert "maxmemory" in rd.config_get("max*")
    assert rd.config_get("appendonly")["appendonly"] in ("yes", "no")


def t_save():
    r.flushall()
    r.execute_command("BF.ADD", "saved", "x")
    before = r.lastsave()
    assert r.save() is True
    assert r.lastsave() >= before
    assert r.bgsave() in (True, b"Background saving started")
    time.sleep(0.3)


def t_quit():
    s = srv.raw()
    s.sendall(b"*1\r\n$4\r\nQUIT\r\nPING\r\n")
    data, eof = recv_all(s, 5)
    s.close()
    assert data == b"+OK\r\n" and eof, data


# -- limits -------------------------------------------------------------------
def t_memory_limit():
    raises("", r.execute_command, "BF.RESERVE", "huge", 0.01, 10 ** 12)
    assert r.exists("huge") == 0
    raises("", r.execute_command, "CF.RESERVE", "hugecf", 10 ** 12)
    assert srv.proc.poll() is None
    assert r.ping()


def t_small_maxmemory():
    with Server("--maxmemory", "200kb") as s2:
        c = s2.client()
        raises("", c.execute_command, "BF.RESERVE", "big", 0.001, 1000000)
        assert c.execute_command("BF.RESERVE", "small", 0.01, 1000) == b"OK"
        assert s2.stop() == 0


def t_maxclients():
    with Server("--maxclients", "3") as s2:
        keep = [s2.raw() for _ in range(3)]
        for k in keep:
            k.sendall(b"PING\r\n")
            recv_all(k, 2, until=lambda d: d.endswith(b"\r\n"))
        extra = s2.raw()
        data, eof = recv_all(extra, 5)
        assert b"max number of clients reached" in data and eof, data
        extra.close()
        for k in keep:
            k.close()
        time.sleep(0.2)
        c = s2.client()
        assert c.ping()
        assert s2.stop() == 0


# -- auth -----------------------------------------------------------------------
def t_auth():
    with Server(password="s3cret") as s2:
        s = s2.raw()
        s.sendall(b"PING\r\n*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$1\r\nx\r\n"
                  b"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$1\r\ny\r\n")
        data, _ = recv_all(s, 5, until=lambda d: d.count(b"\r\n") >= 3)
        assert data == b"-NOAUTH Authentication required.\r\n" * 3, data
        s.sendall(b"AUTH wrong\r\n")
        data, _ = recv_all(s, 5, until=lambda d: d.endswith(b"\r\n"))
        assert data.startswith(b"-WRONGPASS"), data
        s.sendall(b"AUTH s3cret\r\nPING\r\n")
        data, _ = recv_all(s, 5, until=lambda d: d.count(b"\r\n") >= 2)
        assert data == b"+OK\r\n+PONG\r\n", data
        s.close()
        c = s2.client(password=None)
        try:
            c.ping()
            raise AssertionError("PING without AUTH worked")
        except redis.exceptions.AuthenticationError:
            pass
        c2 = s2.client(password="s3cret")
        assert c2.ping()
        c3 = s2.client(username="default", password="s3cret")
        assert c3.ping()
        try:
            s2.client(username="bob", password="s3cret").ping()
            raise AssertionError("AUTH bob worked")
        except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as e:
            assert "invalid username-password pair" in str(e), str(e)
        # HELLO with AUTH
        s = s2.raw()
        s.sendall(b"HELLO 3 AUTH default s3cret\r\n")
        data, _ = recv_all(s, 5, until=lambda d: d.endswith(b"*0\r\n"))
        assert data.startswith(b"%7"), data
        s.close()
        code, out = redis_cli(s2.port, "BF.ADD", "cli", "x", password="s3cret")
        assert out.strip() == "1", out
        assert s2.stop() == 0
    raises("without any password configured", r.execute_command, "AUTH", "x")


def exchange_from(src, port, request, until=None):
    """request sent to 127.0.0.2:port from a socket bound to address src;
    recv_all's (data, eof) of the answer (5 s)."""
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(5)
    s.connect(("127.0.0.2", port))
    s.sendall(request)
    try:
        return recv_all(s, 5, until=until)
    finally:
        s.close()


def t_protected_mode():
    # listening on 127.0.0.2 (still the loopback interface, but not the
    # loopback *address* protected mode trusts): peers other than 127.0.0.1
    # are refused with DENIED.
    with Server(bind="127.0.0.2") as s2:
        data, eof = exchange_from("127.0.0.3", s2.port, b"PING\r\n")
        assert data.startswith(b"-DENIED"), data
        data, _ = exchange_from("127.0.0.1", s2.port, b"PING\r\n",
                                until=lambda d: d.endswith(b"\r\n"))
        assert data == b"+PONG\r\n", data
        assert s2.stop() == 0
    with Server("--protected-mode", "no", bind="127.0.0.2") as s2:
        data, _ = exchange_from("127.0.0.3", s2.port, b"PING\r\n",
                                until=lambda d: d.endswith(b"\r\n"))
        assert data == b"+PONG\r\n", data
        assert s2.stop() == 0
    with Server(bind="127.0.0.2", password="pw") as s2:
        data, _ = exchange_from("127.0.0.3", s2.port, b"AUTH pw\r\nPING\r\n",
                                until=lambda d: d.count(b"\r\n") >= 2)
        assert data == b"+OK\r\n+PONG\r\n", data
        assert s2.stop() == 0


# -- redis-cli ----------------------------------------------------------------
def t_redis_cli():
    p = srv.port
    assert redis_cli(p, "FLUSHALL")[1] == "OK\n"
    assert redis_cli(p, "PING")[1] == "PONG\n"
    assert redis_cli(p, "BF.ADD", "f", "x")[1] == "1\n"
    assert redis_cli(p, "BF.ADD", "f", "x")[1] == "0\n"
    assert redis_cli(p, "BF.MADD", "f", "x", "y", "z")[1] == "0\n1\n1\n"
    assert redis_cli(p, "BF.EXISTS", "f", "y")[1] == "1\n"
    assert redis_cli(p, "TYPE", "f")[1] == "bkbloom--\n"
    assert redis_cli(p, "DBSIZE")[1] == "1\n"
    assert redis_cli(p, "KEYS", "*")[1] == "f\n"
    assert redis_cli(p, "EXPIRE", "f", "100")[1] == "1\n"
    assert redis_cli(p, "TTL", "f")[1] in ("100\n", "99\n")
    assert redis_cli(p, "NOPE")[1].startswith("ERR unknown command 'NOPE'")
    assert redis_cli(p, "--scan")[1] == "f\n"
    code, out = redis_cli(p, "COMMAND", "COUNT")
    assert int(out) >= 60
    # several commands through stdin (redis-cli pipes them)
    code, out = redis_cli(p, stdin=b"BF.ADD g a\nBF.EXISTS g a\nBF.EXISTS g b\n")
    assert out == "1\n1\n0\n", out
    code, out = redis_cli(p, "--raw", "INFO", "server")
    assert "bloomkit_version:" in out
    code, out = redis_cli(p, "-3", "HELLO", "3")
    assert "proto" in out


def t_redis_cli_unix():
    with Server(unixsocket=True) as s2:
        p = subprocess.run(["redis-cli", "-s", s2.unixsocket, "BF.ADD", "u", "x"],
                           capture_output=True, timeout=30)
        assert p.stdout == b"1\n", p
        assert s2.stop() == 0


# -- process: flags, config file, shutdown ----------------------------------------
def t_help():
    p = subprocess.run([SERVER, "--help"], capture_output=True, timeout=30)
    out = p.stdout.decode()
    assert p.returncode == 0
    for flag in ("--port", "--bind", "--unixsocket", "--dir", "--requirepass", "--appendfsync",
                 "--threads", "--maxmemory", "--maxclients", "--proto-max-bulk-len",
                 "--client-output-buffer-limit", "--loglevel", "--logfile"):
        assert flag in out, flag
    assert "(6380)" in out
    p = subprocess.run([SERVER, "--no-such-flag", "1"], capture_output=True, timeout=30)
    assert p.returncode != 0 and b"unknown flag" in p.stderr, p
    p = subprocess.run([SERVER, "--port", "notaport"], capture_output=True, timeout=30)
    assert p.returncode != 0 and b"port" in p.stderr, p


def t_config_file():
    d = tempfile.mkdtemp(prefix="bks-conf-")
    conf = os.path.join(d, "bk.conf")
    port = srv.port + 0
    with open(conf, "w") as f:
        f.write("# a comment\nrequirepass \"frompw\"\nmaxclients 50\nport 1\n")
    from harness import free_port
    port = free_port()
    proc = subprocess.Popen([SERVER, conf, "--port", str(port), "--dir", d],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = redis.Redis(port=port, password="frompw", socket_timeout=5)
        for _ in range(200):
            try:
                if c.ping():
                    break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        assert c.config_get("maxclients") == {b"maxclients": b"50"} or \
            c.config_get("maxclients") == {"maxclients": "50"}
        c.execute_command("SHUTDOWN", "NOSAVE") if False else None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run(["rm", "-rf", d])
    bad = tempfile.mktemp()
    with open(bad, "w") as f:
        f.write("port 6380\nbogus-option 1\n")
    p = subprocess.run([SERVER, bad], capture_output=True, timeout=30)
    os.unlink(bad)
    assert p.returncode != 0 and b":2: unknown option 'bogus-option'" in p.stderr, p.stderr


def t_shutdown_save_and_nosave():
    with Server() as s2:
        c = s2.client()
        c.execute_command("BF.ADD", "kept", "x")
        assert s2.stop() == 0                 # SHUTDOWN SAVE
        s2.start()
        c = s2.client()
        assert c.execute_command("BF.EXISTS", "kept", "x") == 1
        c.execute_command("BF.ADD", "kept", "y")
        assert s2.terminate() == 0            # SIGTERM: graceful, final save
        assert "Saving the final snapshot" in s2.log()
        s2.start()
        c = s2.client()
        assert c.execute_command("BF.EXISTS", "kept", "y") == 1
        c.expire("kept", 1000)
        c.delete("kept") if False else None
        assert s2.stop(nosave=True) == 0      # NOSAVE: the log still has it
        s2.start()
        c = s2.client()
        assert 990 <= c.ttl("kept") <= 1000
        c.delete("kept")
        c.execute_command("BF.ADD", "r1", "x")
        c.rename("r1", "r2")
        assert s2.stop(nosave=True) == 0
        s2.start()
        c = s2.client()
        assert sorted(c.keys("*")) == [b"r2"], c.keys("*")
        assert s2.stop() == 0


for name, fn in list(globals().items()):
    if name.startswith("t_") and callable(fn):
        run.check(name[2:], fn)

r.close()
rd.close()
rc = srv.stop()
run.check("clean exit", lambda: None if rc == 0 else (_ for _ in ()).throw(
    AssertionError("exit code %d\n%s" % (rc, srv.log()))))
srv.close()
run.finish()
