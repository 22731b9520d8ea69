#!/usr/bin/python3
"""The operations side: INFO sections and fields (as python-redis and
redis-cli --stat read them), commandstats / errorstats, MEMORY USAGE and
redis-cli --memkeys / --bigkeys, SLOWLOG, CONFIG SET / GET / REWRITE /
RESETSTAT, CLIENT LIST / INFO / KILL, MONITOR, DEBUG, SIGHUP (log reopened,
server alive), debug logging, and DUMP / RESTORE (the payload format)."""
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
from harness import Runner, Server, raises, redis_cli, scratch_dir  # noqa: E402

run = Runner("test_ops")


# -- INFO -------------------------------------------------------------------

def info_fields():
    with Server(threads=1) as srv:     # SAVE below: see bgsave_in_progress
        r = srv.client()
        r.execute_command("BF.ADD", "f", "x")
        info = r.info()
        # the fields python-redis's own test fixtures read
        assert info["redis_version"]
        assert info["arch_bits"] == 64, info["arch_bits"]
        assert info["cluster_enabled"] == 0
        assert info["redis_mode"] == "standalone"
        assert info["role"] == "master" and info["connected_slaves"] == 0
        assert info["tcp_port"] == srv.port
        assert info["process_id"] == srv.proc.pid
        assert info["executable"].endswith("bloomkit-server")
        assert info["connected_clients"] >= 1 and info["blocked_clients"] == 0
        assert info["used_memory"] > 0 and info["used_memory_rss"] > 0
        assert info["maxmemory"] > 0
        assert isinstance(info["rdb_last_save_time"], int)
        assert info["aof_enabled"] == 1 and info["loading"] == 0
        assert info["rdb_bgsave_in_progress"] == 0
        # writes since the last snapshot: counted, and back to 0 after SAVE
        base = r.info("persistence")["rdb_changes_since_last_save"]
        for i in range(5):
            r.execute_command("BF.ADD", "chg", "i%d" % i)
        r.execute_command("BF.EXISTS", "chg", "i0")    # a read: not a change
        assert r.info("persistence")["rdb_changes_since_last_save"] == base + 5
        r.save()
        assert r.info("persistence")["rdb_changes_since_last_save"] == 0
        r.execute_command("BF.ADD", "chg", "after")
        assert r.info("persistence")["rdb_changes_since_last_save"] == 1
        assert "used_cpu_sys" in info and "used_cpu_user" in info
        assert info["db0"]["keys"] == 1
        mods = info["modules"]
        assert any(m["name"] == "bf" for m in mods), mods
        # default sections do not include commandstats
        assert not any(k.startswith("cmdstat_") for k in info)
        # sections by name, several at once, all/everything
        assert set(r.info("clients")) >= {"connected_clients", "blocked_clients"}
        both = r.execute_command("INFO", "cpu", "cluster")
        assert "used_cpu_sys" in both and "cluster_enabled" in both, both
        assert "redis_version" not in both, both
        for word in ("all", "everything"):
            allinfo = r.info(word)
            assert "cmdstat_bf.add" in allinfo, word
        assert r.execute_command("INFO", "nosuchsection") in (b"", "", {})
        assert srv.stop() == 0


def bgsave_in_progress():
    # one worker thread: the timer that reaps the snapshot child and the
    # sockets live on one thread (TSan reports a descriptor number reused
    # across threads, socket then snapshot file, as a race)
    with Server(threads=1) as srv:
        r = srv.client()
        # a snapshot of ~60 MB takes long enough to be seen in progress
        r.execute_command("BF.RESERVE", "big", "0.0001", "25000000")
        before = r.info("persistence")["rdb_last_save_time"]
        time.sleep(1.1)           # rdb_last_save_time has 1 s resolution
        r.bgsave()
        seen = set()
        deadline = time.time() + 60
        while time.time() < deadline:
            p = r.info("persistence")
            seen.add(p["rdb_bgsave_in_progress"])
            if p["rdb_bgsave_in_progress"] == 0 and p["rdb_last_save_time"] > before:
                break
            time.sleep(0.002)
        assert seen == {0, 1} or seen == {1, 0}, seen
        assert r.info("persistence")["rdb_last_save_time"] > before
        assert srv.stop() == 0


def info_stats_counts():
    with Server() as srv:
        r = srv.client()
        r.config_resetstat()
        before = r.info("stats")
        for i in range(50):
            r.execute_command("BF.ADD", "f", "item%d" % i)
        r.execute_command("BF.EXISTS", "f", "item1")     # hit
        r.execute_command("BF.EXISTS", "nokey", "x")     # miss
        raises("wrong number", r.execute_command, "BF.ADD", "f")
        raises("WRONGTYPE", r.execute_command, "CF.ADD", "f", "x")
        after = r.info("stats")
        assert after["total_commands_processed"] >= before["total_commands_processed"] + 54
        assert after["keyspace_hits"] >= 1 and after["keyspace_misses"] >= 1
        assert after["total_error_replies"] == 2, after["total_error_replies"]
        assert after["total_rejected_calls"] == 1
        assert after["total_failed_calls"] == 1
        cs = r.info("commandstats")
        add = cs["cmdstat_bf.add"]
        assert add["calls"] == 50, add
        assert add["rejected_calls"] == 1 and add["failed_calls"] == 0, add
        assert add["usec"] >= 0 and "usec_per_call" in add
        assert cs["cmdstat_cf.add"]["failed_calls"] == 1
        es = r.info("errorstats")       # "count=1": python-redis leaves it a string
        assert es["errorstat_ERR"] == "count=1", es
        assert es["errorstat_WRONGTYPE"] == "count=1", es
        # pipelined adds (coalesced into one batch inside) count one call each
        p = r.pipeline(transaction=False)
        for i in range(30):
            p.execute_command("BF.ADD", "g", "k%d" % i)
        p.execute()
        assert r.info("commandstats")["cmdstat_bf.add"]["calls"] == 80
        # ops/sec: sampled every 100 ms over the last 1.6 s
        stop = time.time() + 1.0
        n = 0
        while time.time() < stop:
            r.ping()
            n += 1
        ops = r.info("stats")["instantaneous_ops_per_sec"]
        assert ops > 0, ops
        r.config_resetstat()
        assert "cmdstat_bf.add" not in r.info("commandstats")
        assert r.info("stats")["keyspace_hits"] == 0
        assert srv.stop() == 0


def redis_cli_stat():
    with Server() as srv:
        # line-buffered through a pipe (redis-cli buffers fully otherwise)
        p = subprocess.Popen(["stdbuf", "-oL", "redis-cli", "-p", str(srv.port), "--stat",
                              "-i", "0.2"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        time.sleep(1.2)
        p.send_signal(signal.SIGINT)
        out = p.communicate(timeout=10)[0].decode()
        assert "-9223372036854775808" not in out, out
        lines = [l for l in out.splitlines() if l.strip() and l.strip()[0].isdigit()]
        assert lines, out
        # keys mem clients blocked requests connections
        fields = lines[-1].split()
        assert fields[2] == "1" or fields[2] == "2", fields     # clients
        assert fields[3] == "0", fields                          # blocked
        assert srv.stop() == 0


# -- MEMORY, redis-cli --memkeys / --bigkeys ----------------------------------

def memory_usage():
    with Server() as srv:
        r = srv.client()
        r.execute_command("BF.RESERVE", "big", "0.001", "1000000")
        r.execute_command("BF.RESERVE", "small", "0.01", "100")
        r.execute_command("CF.RESERVE", "cf", "10000")
        big = r.memory_usage("big")
        small = r.memory_usage("small")
        reply = r.execute_command("BF.INFO", "big")
        size = dict(zip(reply[0::2], reply[1::2]))[b"Size"]
        assert size <= big < size + 4096, (big, size)
        assert 0 < small < big
        assert r.memory_usage("cf") > 0
        assert r.memory_usage("missing") is None
        assert r.execute_command("MEMORY", "USAGE", "big", "SAMPLES", "5") == big
        raises("unknown subcommand", r.execute_command, "MEMORY", "NOPE")
        st = r.execute_command("MEMORY", "STATS")
        assert b"keys.count" in st
        assert b"memory" in r.execute_command("MEMORY", "DOCTOR")
        code, out = redis_cli(srv.port, "--memkeys")
        assert code == 0, out
        assert "0 bytes" not in out.split("-------- summary -------")[-1].split(
            "Biggest")[0] or "big" in out, out
        assert '"big"' in out, out
        code, out = redis_cli(srv.port, "--bigkeys")
        assert code == 0 and "3 keys" in out or "Sampled 3 keys" in out, out
        assert srv.stop() == 0


# -- SLOWLOG ------------------------------------------------------------------

def slowlog():
    with Server() as srv:
        r = srv.client()
        assert r.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"] == "10000"
        assert r.config_get("slowlog-max-len")["slowlog-max-len"] == "128"
        r.slowlog_reset()
        r.config_set("slowlog-log-slower-than", "0")
        r.execute_command("BF.ADD", "f", "x" * 300)
        entries = r.slowlog_get()
        assert entries, entries
        e = [e for e in entries if e["command"].startswith(b"BF.ADD")][0]
        assert e["duration"] >= 0 and e["start_time"] > 1600000000
        # arguments are trimmed to 128 bytes as Redis does
        assert b"more bytes" in e["command"], e
        assert r.slowlog_len() >= 1
        r.config_set("slowlog-max-len", "3")
        for i in range(10):
            r.ping()
        assert r.slowlog_len() == 3
        assert len(r.slowlog_get(2)) == 2
        r.config_set("slowlog-log-slower-than", "-1")
        r.slowlog_reset()
        r.ping()
        assert r.slowlog_len() == 0
        # DEBUG SLEEP is slow: logged with its real duration
        r.config_set("slowlog-log-slower-than", "100000")
        r.execute_command("DEBUG", "SLEEP", "0.2")
        e = r.slowlog_get(1)[0]
        assert e["command"] == b"DEBUG SLEEP 0.2" and e["duration"] >= 200000, e
        raises("count should be", r.execute_command, "SLOWLOG", "GET", "-5")
        assert srv.stop() == 0


# -- CONFIG -------------------------------------------------------------------

def config_set_get():
    with Server("--appendfsync", "no") as srv:
        r = srv.client()
        r.config_set("maxmemory", "1mb")
        assert r.config_get("maxmemory")["maxmemory"] == str(1 << 20)
        try:
            r.execute_command("BF.RESERVE", "f", "0.0001", "10000000")
            raise AssertionError("a 24 MB filter fitted in maxmemory 1mb")
        except redis.exceptions.ResponseError as e:
            assert "maxmemory" in str(e) or "Insufficient memory" in str(e), str(e)
        r.config_set("maxmemory", "0")
        r.execute_command("BF.RESERVE", "f", "0.0001", "10000000")
        r.config_set("loglevel", "debug")
        assert r.config_get("loglevel")["loglevel"] == "debug"
        r.config_set("maxclients", "500")
        assert r.info("clients")["maxclients"] == 500
        # appendfsync at run time, each way (everysec starts its fsync thread
        # when the server began without one); writes go on and are kept
        for mode in ("always", "no", "everysec", "always"):
            r.config_set("appendfsync", mode)
            assert r.config_get("appendfsync")["appendfsync"] == mode
            r.execute_command("BF.ADD", "fs", mode)
        raises("possibly related to argument 'appendfsync'", r.config_set, "appendfsync",
               "sometimes")
        raises("immutable", r.config_set, "port", "1234")
        raises("Unknown option", r.config_set, "nosuch", "1")
        raises("possibly related to argument 'maxmemory'", r.config_set, "maxmemory", "lots")
        # requirepass at run time: new connections must AUTH
        # requirepass at run time: new connections must AUTH, existing ones
        # stay authenticated (as in Redis)
        r.config_set("requirepass", "s3cret")
        c2 = srv.client()
        try:
            c2.ping()
            raise AssertionError("no password needed")
        except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as e:
            assert "NOAUTH" in str(e) or "Authentication required" in str(e), str(e)
        assert srv.client(password="s3cret").ping()
        r.config_set("requirepass", "")
        assert srv.client().ping()
        raises("without a config file", r.config_rewrite)
        srv.kill()              # no final snapshot: the log must have them
        srv.start()
        r = srv.client()
        assert r.execute_command("BF.MEXISTS", "fs", "always", "no", "everysec") == [1, 1, 1]
        assert srv.stop() == 0


def config_rewrite():
    d = scratch_dir("bks-conf-")
    conf = os.path.join(d, "bloomkit.conf")
    with open(conf, "w") as f:
        f.write("# my settings\nloglevel notice\nmaxclients 100\n")
    srv = Server(wait=False)
    srv.proc.kill()
    srv.proc.wait()
    srv.command_line = lambda: [
        os.environ.get("BLOOMKIT_SERVER") or
        os.path.join(os.path.dirname(__file__), "..", "..", "build", "release", "server",
                     "bloomkit-server"),
        conf, "--port", str(srv.port), "--dir", srv.dir, "--threads", "2"]
    srv.start()
    with srv:
        r = srv.client()
        assert r.info("server")["config_file"] == conf
        r.config_set("maxclients", "321")
        r.config_set("slowlog-max-len", "7")
        assert r.config_rewrite()
        text = open(conf).read()
        assert "# my settings" in text, text
        assert "maxclients 321" in text and "maxclients 100" not in text, text
        assert "slowlog-max-len 7" in text, text
        srv.restart()
        r = srv.client()
        assert r.config_get("maxclients")["maxclients"] == "321"
        assert r.config_get("slowlog-max-len")["slowlog-max-len"] == "7"
        assert srv.stop() == 0


# -- CLIENT -------------------------------------------------------------------

def client_list_kill():
    with Server() as srv:
        r = srv.client()
        victim = srv.client()
        victim.client_setname("victim")
        vid = victim.client_id()
        victim.execute_command("BF.ADD", "f", "x")
        clients = r.client_list()
        v = [c for c in clients if c["name"] == "victim"][0]
        for field in ("id", "addr", "laddr", "age", "idle", "flags", "db", "cmd", "user",
                      "resp"):
            assert field in v, (field, v)
        assert v["cmd"] == "bf.add" and v["flags"] == "N", v
        me = r.client_info()
        assert int(me["id"]) == r.client_id()
        # kill by ID from another connection (possibly another worker)
        assert r.client_kill_filter(_id=vid) == 1
        deadline = time.time() + 5
        while vid in [int(c["id"]) for c in r.client_list()] and time.time() < deadline:
            time.sleep(0.05)
        assert vid not in [int(c["id"]) for c in r.client_list()]
        # a raw connection sees its socket closed
        raw = srv.raw()
        raw.sendall(b"CLIENT ID\r\n")
        rid = int(raw.recv(100)[1:].split(b"\r\n")[0])
        assert r.client_kill_filter(_id=rid) == 1
        raw.settimeout(5)
        assert raw.recv(100) == b"", "killed connection still open"
        raw.close()
        # the old ip:port form
        v2 = srv.client()
        v2.ping()
        addr = [c for c in r.client_list() if int(c["id"]) == v2.client_id()][0]["addr"]
        assert r.execute_command("CLIENT", "KILL", addr) == b"OK"
        raises("No such client", r.execute_command, "CLIENT", "KILL", "1.2.3.4:5")
        # SKIPME yes (the default): the caller survives killing its own address
        myaddr = r.client_info()["addr"]
        assert r.execute_command("CLIENT", "KILL", "ADDR", myaddr) == 0
        assert r.execute_command("CLIENT", "KILL", "TYPE", "pubsub") == 0
        raises("Unknown client type", r.execute_command, "CLIENT", "KILL", "TYPE", "x")
        raises("client-id should be", r.execute_command, "CLIENT", "KILL", "ID", "0")
        raises("No such client", r.execute_command, "CLIENT", "KILL", "ID")  # ip:port form
        raises("syntax error", r.execute_command, "CLIENT", "KILL", "ID", "1", "MAXAGE")
        assert r.ping()
        assert srv.stop() == 0


# -- MONITOR ------------------------------------------------------------------

def monitor_stream():
    with Server(threads=2) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(b"MONITOR\r\n")
        assert s.recv(5) == b"+OK\r\n"
        # several clients (the kernel spreads them over both workers)
        clients = [srv.client() for _ in range(4)]
        for i, c in enumerate(clients):
            c.execute_command("BF.ADD", "k%d" % i, 'a "quoted"\nitem')
        buf = b""
        deadline = time.time() + 5
        while buf.count(b"\r\n") < 4 and time.time() < deadline:
            buf += s.recv(65536)
        lines = [l for l in buf.decode().split("\r\n") if "BF.ADD" in l]
        assert len(lines) == 4, buf
        line = lines[0]
        assert line.startswith("+") and " [0 127.0.0.1:" in line, line
        stamp = line[1:].split(" ")[0]
        assert abs(float(stamp) - time.time()) < 30, stamp
        assert line.endswith('"BF.ADD" "k0" "a \\"quoted\\"\\nitem"') or \
            any(l.endswith('"a \\"quoted\\"\\nitem"') for l in lines), lines
        # pipelined adds are shown one by one, as sent
        p = clients[0].pipeline(transaction=False)
        for i in range(5):
            p.execute_command("BF.ADD", "pipe", "i%d" % i)
        p.execute()
        while buf.count(b'"pipe"') < 5 and time.time() < deadline:
            buf += s.recv(65536)
        assert buf.count(b'"BF.ADD" "pipe"') == 5, buf
        assert srv.client().client_list()[0] is not None
        flags = [c["flags"] for c in srv.client().client_list()]
        assert "O" in flags, flags
        s.close()
        time.sleep(0.2)
        clients[0].ping()    # no monitor left: nothing to feed
        assert srv.stop() == 0


# -- DEBUG, SIGHUP, debug logging ---------------------------------------------

def debug_and_logs():
    d = scratch_dir("bks-log-")
    logfile = os.path.join(d, "server.log")
    with Server("--logfile", logfile, "--loglevel", "debug") as srv:
        r = srv.client()
        t0 = time.time()
        assert r.execute_command("DEBUG", "SLEEP", "0.3") == b"OK"
        assert time.time() - t0 >= 0.3
        raises("not supported", r.execute_command, "DEBUG", "JMAP")
        raises("not supported", r.execute_command, "DEBUG", "RELOAD")
        raises("DEBUG SLEEP wants", r.execute_command, "DEBUG", "SLEEP", "abc")
        r.execute_command("BF.ADD", "f", "x")
        assert b"serializedlength" in r.execute_command("DEBUG", "OBJECT", "f")
        text = open(logfile).read()
        assert "connected" in text and '"BF.ADD" "f" "x"' in text, text[-2000:]
        # logrotate: move the file away, SIGHUP, the server writes a new one
        os.rename(logfile, logfile + ".1")
        srv.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert srv.proc.poll() is None, "SIGHUP stopped the server"
        r.execute_command("BF.ADD", "f", "y")
        time.sleep(0.1)
        assert os.path.exists(logfile), "log file not reopened"
        assert "SIGHUP" in open(logfile).read()
        assert r.execute_command("BF.EXISTS", "f", "x") == 1
        assert srv.stop() == 0


# -- DUMP / RESTORE -------------------------------------------------------------

CRC_POLY = 0x95AC9329AC4BC9B5


def crc64(data):
    """CRC-64/Jones as Redis computes it, written bit by bit (independent
    of the server's table-driven code)."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ CRC_POLY if crc & 1 else crc >> 1
    return crc


def type_id(name, encver):
    cset = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    v = 0
    for ch in name:
        v = (v << 6) | cset.index(ch)
    return (v << 10) | encver


def dump_restore():
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA   # the published check value
    with Server() as srv:
        r = srv.client()
        r.execute_command("BF.RESERVE", "bf", "0.01", "1000")
        r.execute_command("BF.MADD", "bf", *["m%d" % i for i in range(500)])
        r.execute_command("CF.RESERVE", "cf", "1000")
        r.execute_command("CF.ADD", "cf", "c1")
        payload = r.dump("bf")
        assert payload[0] == 7, payload[:4]                  # RDB_TYPE_MODULE_2
        assert payload[1] == 0x81                            # a 64-bit length follows
        assert struct.unpack(">Q", payload[2:10])[0] == type_id("bkbloom--", 1)
        assert struct.unpack("<H", payload[-10:-8])[0] == 10
        assert struct.unpack("<Q", payload[-8:])[0] == crc64(payload[:-8])
        assert r.dump("missing") is None
        r.restore("bf2", 0, payload)
        assert r.execute_command("TYPE", "bf2") == b"bkbloom--"
        for i in range(500):
            assert r.execute_command("BF.EXISTS", "bf2", "m%d" % i) == 1
        assert r.execute_command("BF.INFO", "bf2", "ITEMS") == \
            r.execute_command("BF.INFO", "bf", "ITEMS")
        raises("BUSYKEY Target key name already exists.", r.restore, "bf2", 0, payload)
        r.restore("bf2", 0, r.dump("cf"), replace=True)
        assert r.execute_command("TYPE", "bf2") == b"bkcuckoo-"
        assert r.execute_command("CF.EXISTS", "bf2", "c1") == 1
        # TTL, relative and absolute
        r.restore("t1", 5000, payload)
        assert 0 < r.pttl("t1") <= 5000
        r.restore("t2", int(time.time() * 1000) + 60000, payload, absttl=True)
        assert 50000 < r.pttl("t2") <= 60000
        r.restore("t3", int(time.time() * 1000) - 1000, payload, absttl=True)
        assert r.exists("t3") == 0
        raises("Invalid TTL", r.restore, "t4", -1, payload)
        # damaged payloads: checksum, version, truncation; nothing created
        bad = bytearray(payload)
        bad[20] ^= 1
        raises("checksum are wrong", r.restore, "x", 0, bytes(bad))
        raises("checksum are wrong", r.restore, "x", 0, payload[:5])
        newer = payload[:-10] + struct.pack("<H", 99)
        newer += struct.pack("<Q", crc64(newer))
        raises("checksum are wrong", r.restore, "x", 0, newer)
        # a Redis string value (type 0), and RedisBloom's type without its fields:
        # clear errors
        s = b"\x00\x03abc" + struct.pack("<H", 10)
        s += struct.pack("<Q", crc64(s))
        raises("not a filter", r.restore, "x", 0, s)
        rb = b"\x07\x81" + struct.pack(">Q", type_id("MBbloom--", 4)) + b"\x00"
        rb += struct.pack("<H", 10)
        rb += struct.pack("<Q", crc64(rb))
        raises("MBbloom--", r.restore, "x", 0, rb)
        inner = payload[:-10]
        cut = inner[:-40] + b"\x00" + struct.pack("<H", 10)
        cut += struct.pack("<Q", crc64(cut))
        raises("Bad data format", r.restore, "x", 0, cut)
        assert r.exists("x") == 0
        # restored keys survive a restart (logged), expiry included
        srv.restart()
        r = srv.client()
        assert r.execute_command("BF.EXISTS", "bf2", "m1") == 0
        assert r.execute_command("CF.EXISTS", "bf2", "c1") == 1
        assert 40000 < r.pttl("t2") <= 60000
        assert srv.stop() == 0


def dump_while_adding():
    """DUMP of keys that other clients add to meanwhile (a chain's adds and
    CBF.ADD share the key's lock): every payload restores, and holds every
    item whose add was answered before the DUMP was sent."""
    with Server(threads=2) as srv:
        r = srv.client()
        r.execute_command("BF.RESERVE", "bf", "0.01", "20000")
        r.execute_command("CBF.RESERVE", "cbf", "0.01", "400000")
        r.execute_command("BF.ADD", "bf", "first")    # the shared path needs the key
        r.execute_command("CBF.ADD", "cbf", "first")
        stop = threading.Event()
        done = {}                                    # key -> items answered so far
        lock = threading.Lock()
        errors = []

        def adder(key, cmd, tag):
            c = srv.client()
            i = 0
            try:
                while not stop.is_set() and i < 300000:
                    items = ["%s-%d" % (tag, i + j) for j in range(100)]
                    c.execute_command(cmd, key, *items)
                    i += 100
                    with lock:
                        done[(key, tag)] = i
            except Exception as e:                   # reported below
                errors.append(e)

        threads = [threading.Thread(target=adder, args=a) for a in
                   (("bf", "BF.MADD", "a"), ("bf", "BF.MADD", "b"),
                    ("cbf", "CBF.MADD", "c"))]
        for t in threads:
            t.start()
        try:
            time.sleep(0.2)
            for n in range(60):
                key = "bf" if n % 2 == 0 else "cbf"
                with lock:
                    answered = {tag: i for (k, tag), i in done.items() if k == key}
                payload = r.dump(key)
                r.restore("copy", 0, payload, replace=True)   # checksum, image: valid
                check = "BF.MEXISTS" if key == "bf" else "CBF.MEXISTS"
                for tag, i in answered.items():
                    if i:
                        got = r.execute_command(check, "copy", "%s-0" % tag,
                                                "%s-%d" % (tag, i - 1))
                        assert got == [1, 1], (key, tag, i, got)
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert not errors, errors
        assert srv.stop() == 0


def copy_past_output_limit():
    """bloomkit copy pipelines DUMPs whose replies together pass the
    source's client-output-buffer-limit many times over: the source holds
    the pipeline back until the client reads, so every key is copied."""
    cli = os.environ.get("BLOOMKIT_CLI") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "release", "cli",
        "bloomkit")
    with Server("--client-output-buffer-limit", "1mb") as src, Server() as dst:
        r = src.client()
        for i in range(60):
            r.execute_command("BF.RESERVE", "k%d" % i, "0.01", "100000")   # 120 KB each
            r.execute_command("BF.ADD", "k%d" % i, "v%d" % i)
        p = subprocess.run([cli, "copy", "127.0.0.1:%d" % src.port, "127.0.0.1:%d" % dst.port],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and p.stdout.strip() == "copied 60 keys", (p.stdout, p.stderr)
        d = dst.client()
        for i in range(60):
            assert d.execute_command("BF.EXISTS", "k%d" % i, "v%d" % i) == 1
        assert int(r.info("stats")["client_output_buffer_limit_disconnections"]) == 0
        assert src.stop() == 0 and dst.stop() == 0


def main():
    run.check("INFO: sections and the fields clients read", info_fields)
    run.check("INFO: rdb_bgsave_in_progress during a BGSAVE", bgsave_in_progress)
    run.check("INFO: stats, commandstats, errorstats, ops/sec", info_stats_counts)
    run.check("redis-cli --stat prints real numbers", redis_cli_stat)
    run.check("MEMORY USAGE, --memkeys, --bigkeys", memory_usage)
    run.check("SLOWLOG GET/LEN/RESET and its settings", slowlog)
    run.check("CONFIG SET/GET at run time", config_set_get)
    run.check("CONFIG REWRITE keeps the file, writes new values", config_rewrite)
    run.check("CLIENT LIST fields, CLIENT KILL forms", client_list_kill)
    run.check("MONITOR streams commands as Redis formats them", monitor_stream)
    run.check("DEBUG, debug log, SIGHUP reopens the log", debug_and_logs)
    run.check("DUMP/RESTORE: format, TTL, REPLACE, bad payloads", dump_restore)
    run.check("DUMP while other clients add: every payload restores", dump_while_adding)
    run.check("bloomkit copy of more than the output limit in one pipeline",
              copy_past_output_limit)
    run.finish()


if __name__ == "__main__":
    main()
