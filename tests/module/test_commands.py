#!/usr/bin/python3
"""The server's command suite (tests/server/test_commands.py), unchanged,
against Debian's redis-server with bloomkit.so loaded.

    BLOOMKIT_MODULE=build/release/module/bloomkit.so /usr/bin/python3 tests/module/test_commands.py
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402  (sets BLOOMKIT_MODULE for the child)

modutil.require()
suite = os.path.join(modutil.SERVER_TESTS, "test_commands.py")
rc = subprocess.run([sys.executable, suite], env=os.environ, timeout=600).returncode
# the suite exits 2 when it could not start a server: a failure here
sys.exit(0 if rc == 0 else 1)
