#!/usr/bin/python3
"""Issue 31's BF dialects in Debian's redis-server with bloomkit.so: the
server suite (tests/server/test_bf_dialect.py; the configuration names are
"bloomkit.<name>" on Redis 7), and valkey-bloom's keyspace notifications
of BF and CF writes (class "g", generic), seen by a pubsub client on
__keyspace@0__:* with notify-keyspace-events configured.

    BLOOMKIT_MODULE=build/release/module/bloomkit.so /usr/bin/python3 tests/module/test_bf_dialect.py
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402  (sets BLOOMKIT_MODULE for the child)

modutil.require()
from harness import Runner, Server  # noqa: E402


def events_of(r, commands):
    """The keyspace events (key, event) that running commands publishes."""
    p = r.pubsub()
    p.psubscribe("__keyspace@0__:*")
    deadline = time.time() + 5
    while p.get_message(timeout=0.2) is None and time.time() < deadline:
        pass   # the subscribe confirmation
    for cmd in commands:
        try:
            r.execute_command(*cmd)
        except Exception:
            pass
    got = []
    deadline = time.time() + 2
    while time.time() < deadline:
        m = p.get_message(timeout=0.2)
        if m and m["type"] == "pmessage":
            got.append((m["channel"].decode().split(":", 1)[1], m["data"].decode()))
    p.close()
    return got


def notifications(r):
    assert r.config_set("notify-keyspace-events", "Kg")
    got = events_of(r, [
        ("BF.RESERVE", "b1", "0.01", "100"),
        ("BF.ADD", "b1", "x"),
        ("BF.ADD", "b1", "x"),          # nothing added: no event
        ("BF.MADD", "b2", "x", "y"),    # created by the add
        ("BF.INSERT", "b3", "CAPACITY", "10", "ITEMS", "a"),
        ("CF.RESERVE", "c1", "100"),
        ("CF.ADD", "c1", "x"),
        ("CF.INSERT", "c1", "ITEMS", "y"),
        ("CF.DEL", "c1", "x"),
        ("BF.EXISTS", "b1", "x"),       # reads: none
    ])
    want = [("b1", "bloom.reserve"), ("b1", "bloom.add"),
            ("b2", "bloom.add"), ("b2", "bloom.reserve"),
            ("b3", "bloom.add"), ("b3", "bloom.reserve"),
            ("c1", "cuckoo.reserve"), ("c1", "cuckoo.add"), ("c1", "cuckoo.insert"),
            ("c1", "cuckoo.del")]
    assert got == want, got
    r.config_set("notify-keyspace-events", "")
    assert events_of(r, [("BF.ADD", "b4", "x")]) == []


def main():
    passed = modutil.server_suite("test_bf_dialect.py", timeout=900)
    run = Runner("bf_dialect (module)")
    with Server() as srv:
        run.check("keyspace notifications of BF and CF writes", notifications, srv.client())
    if not passed:
        print("the server suite failed under the module")
        sys.exit(1)
    run.finish()


if __name__ == "__main__":
    main()
