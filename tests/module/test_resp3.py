#!/usr/bin/python3
"""RESP3 reply types, LOADCHUNK safety and error texts
(tests/server/test_resp3.py), unchanged, against Debian's redis-server with
bloomkit.so loaded."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402  (sets BLOOMKIT_MODULE for the child)

modutil.run_server_suite("test_resp3.py")
