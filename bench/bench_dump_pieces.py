#!/usr/bin/python3
"""bench_dump_pieces.py - the cost of writing one large filter out in
pieces: BF.SCANDUMP to the end on bloomkit-server (4 MiB chunks), and SAVE
and DEBUG DIGEST-VALUE on redis-server with bloomkit.so (the module writes
a value in 256 KiB pieces). Each piece used to checksum the whole filter.

Usage: bench/bench_dump_pieces.py [SERVER [MODULE]]
  SERVER  bloomkit-server (default build/release/server/bloomkit-server)
  MODULE  bloomkit.so (default build/release/module/bloomkit.so)
  env: CAPACITY (default 50000000 at 0.0001: a 120 MB filter)
"""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import harness  # noqa: E402


def fill(r):
    r.execute_command("BF.RESERVE", "k", "0.0001", os.environ.get("CAPACITY", "50000000"),
                      "NONSCALING")
    r.execute_command("BF.MADD", "k", *["x%d" % i for i in range(1000)])
    return r.execute_command("BF.INFO", "k", "SIZE")[0]


def server(path):
    harness.SERVER = path
    harness.MODULE = None
    with harness.Server() as srv:
        r = srv.client()
        size = fill(r)
        t, it, chunks = time.time(), 0, []
        while True:
            it, data = r.execute_command("BF.SCANDUMP", "k", it)
            if it == 0:
                break
            chunks.append((it, data))
        dt = time.time() - t
        for it, data in chunks:
            r.execute_command("BF.LOADCHUNK", "copy", it, data)
        assert r.execute_command("BF.EXISTS", "copy", "x5") == 1
        print("| bloomkit-server | %d | BF.SCANDUMP, %d chunks | %.2f |" % (size, len(chunks), dt))


def module(path):
    harness.MODULE = os.path.abspath(path)
    with harness.Server() as srv:
        r = srv.client()
        size = fill(r)
        t = time.time()
        r.execute_command("SAVE")
        save = time.time() - t
        t = time.time()
        r.execute_command("DEBUG", "DIGEST-VALUE", "k")
        digest = time.time() - t
        print("| redis-server + bloomkit.so | %d | SAVE | %.2f |" % (size, save))
        print("| redis-server + bloomkit.so | %d | DEBUG DIGEST-VALUE | %.2f |" % (size, digest))


def main():
    srv = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, "build", "release", "server", "bloomkit-server")
    mod = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        ROOT, "build", "release", "module", "bloomkit.so")
    print("| host | filter bytes | operation | seconds |")
    print("|---|---:|---|---:|")
    server(srv)
    module(mod)


if __name__ == "__main__":
    main()
