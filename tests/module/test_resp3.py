#!/usr/bin/python3
"""RESP3 reply types, LOADCHUNK safety and error texts
(tests/server/test_resp3.py), unchanged, against Debian's redis-server with
bloomkit.so loaded."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402  (sets BLOOMKIT_MODULE for the child)

modutil.require()
suite = os.path.join(modutil.SERVER_TESTS, "test_resp3.py")
rc = subprocess.run([sys.executable, suite], env=os.environ, timeout=600).returncode
sys.exit(0 if rc == 0 else 1)
