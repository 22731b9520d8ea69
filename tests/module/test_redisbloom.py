#!/usr/bin/python3
"""RedisBloom's data taken over by bloomkit.so in Debian's redis-server
(tests/server/test_redisbloom.py, which adds the RDB door for the module):
RedisBloom's dump.rdb, its chunks and its DUMP payloads.

    BLOOMKIT_MODULE=build/release/module/bloomkit.so /usr/bin/python3 tests/module/test_redisbloom.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402  (sets BLOOMKIT_MODULE for the child)

modutil.run_server_suite("test_redisbloom.py", timeout=900)
