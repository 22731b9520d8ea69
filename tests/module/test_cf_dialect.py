#!/usr/bin/python3
"""RedisBloom's CF dialect (every bucket size, its limits and texts,
CF.INFO Size, CF.DEBUG) in bloomkit.so inside Debian's redis-server: the
suite of tests/server/test_cf_dialect.py, run with the module.

    BLOOMKIT_MODULE=build/release/module/bloomkit.so /usr/bin/python3 tests/module/test_cf_dialect.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402  (sets BLOOMKIT_MODULE for the child)

modutil.run_server_suite("test_cf_dialect.py", timeout=900)
