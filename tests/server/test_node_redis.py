#!/usr/bin/python3
"""node-redis 5, a real RESP3 client, against bloomkit-server (or, with
$BLOOMKIT_MODULE set, redis-server with bloomkit.so: tests/module/).

Starts a server and runs tests/node/test_typed_api.mjs with Debian's
nodejs: every BF.* / CF.* command through node-redis's typed API, over
RESP3 and RESP2. node_modules/ comes from scripts/install-deps.sh (npm ci
from the committed package-lock.json); missing, it is a failure.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ROOT, Server  # noqa: E402

NODE_DIR = os.path.join(ROOT, "tests", "node")
node = shutil.which("node") or shutil.which("nodejs")
if not node or not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "redis")):
    print("test_node_redis: nodejs or tests/node/node_modules is missing: run "
          "scripts/install-deps.sh")
    sys.exit(1)

with Server(threads=2) as srv:
    rc = subprocess.run([node, os.path.join(NODE_DIR, "test_typed_api.mjs"), str(srv.port)],
                        cwd=NODE_DIR, timeout=240).returncode
    if srv.proc.poll() is not None:
        print("the server died:\n" + srv.log()[-3000:])
        rc = 1
    code = srv.stop()
    if code != 0:
        print("server exit code %d:\n%s" % (code, srv.log()[-3000:]))
        rc = 1
sys.exit(0 if rc == 0 else 1)
