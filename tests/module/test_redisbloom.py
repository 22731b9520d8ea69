#!/usr/bin/python3
"""RedisBloom's data taken over by bloomkit.so in Debian's redis-server
(tests/server/test_redisbloom.py, which adds the RDB door for the module):
RedisBloom's dump.rdb, its chunks and its DUMP payloads.

    BLOOMKIT_MODULE=build/release/module/bloomkit.so /usr/bin/python3 tests/module/test_redisbloom.py
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402  (sets BLOOMKIT_MODULE for the child)

modutil.require()
suite = os.path.join(modutil.SERVER_TESTS, "test_redisbloom.py")
rc = subprocess.run([sys.executable, suite], env=os.environ, timeout=900).returncode
sys.exit(0 if rc == 0 else 1)
