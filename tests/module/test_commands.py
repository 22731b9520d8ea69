#!/usr/bin/python3
"""The server's command suite (tests/server/test_commands.py), unchanged,
against Debian's redis-server with bloomkit.so loaded.

    BLOOMKIT_MODULE=build/release/module/bloomkit.so /usr/bin/python3 tests/module/test_commands.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402  (sets BLOOMKIT_MODULE for the child)

modutil.run_server_suite("test_commands.py")
