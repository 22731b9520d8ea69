#!/usr/bin/python3
"""node-redis 5's typed BF/CF API (tests/server/test_node_redis.py), unchanged,
against Debian's redis-server with bloomkit.so loaded."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402  (sets BLOOMKIT_MODULE for the child)

modutil.run_server_suite("test_node_redis.py")
