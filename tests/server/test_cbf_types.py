#!/usr/bin/python3
"""CBF.RESERVE ... TYPE (issue 15): the counting kinds dleft, varcount,
hier, hybrid and morris through the CBF.* commands, their errors, and
their survival of a restart (snapshot + log).

Run with Debian's interpreter: /usr/bin/python3 tests/server/test_cbf_types.py
Prints "N passed, M failed"; exits non-zero on any failure, 2 when the
server is unavailable.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import expect_error  # noqa: E402


TYPES = ["dleft", "varcount", "hier", "hybrid", "morris"]
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


@test
def every_type_counts_and_deletes(srv, r):
    for t in TYPES:
        key = "c:" + t
        assert r.execute_command("CBF.RESERVE", key, "0.01", "1000", "TYPE", t) in (b"OK", True)
        assert r.execute_command("CBF.MADD", key, "a", "b", "a") == [1, 1, 0]
        assert r.execute_command("CBF.COUNT", key, "a") == 2
        assert r.execute_command("CBF.MEXISTS", key, "a", "b", "zz") == [1, 1, 0]
        if t == "morris":
            expect_error(lambda: r.execute_command("CBF.DEL", key, "a"),
                         "operation not supported by this filter")
            continue
        assert r.execute_command("CBF.DEL", key, "b") == 1
        assert r.execute_command("CBF.EXISTS", key, "b") == 0
        assert r.execute_command("CBF.DEL", key, "b") == 0
        assert r.execute_command("CBF.COUNT", key, "a") == 2


@test
def reserve_errors(srv, r):
    expect_error(lambda: r.execute_command("CBF.RESERVE", "e", "0.01", "100", "TYPE", "nope"),
                 "unknown TYPE (counting, dleft, varcount, hier, hybrid, morris)")
    expect_error(lambda: r.execute_command("CBF.RESERVE", "e", "0.01", "100", "TYPE", "hier",
                                           "COUNTERBITS", "4"),
                 "COUNTERBITS applies to TYPE counting or dleft")
    expect_error(lambda: r.execute_command("CBF.RESERVE", "e", "0.01", "100", "COUNTERBITS", "5"),
                 "counter bits must be 4 or 8")
    expect_error(lambda: r.execute_command("CBF.RESERVE", "e", "0.01", "100", "TYPE"),
                 "wrong number of arguments for 'cbf.reserve' command")
    assert r.exists("e") == 0
    assert r.execute_command("CBF.RESERVE", "d4", "0.01", "100", "COUNTERBITS", "4",
                             "TYPE", "dleft") in (b"OK", True)


@test
def survives_restart(srv, r):
    for t in TYPES:
        r.execute_command("CBF.RESERVE", "p:" + t, "0.001", "5000", "TYPE", t)
        r.execute_command("CBF.MADD", "p:" + t, *["k%d" % i for i in range(2000)])
        r.execute_command("CBF.ADD", "p:" + t, "k7")
    srv.restart()
    r2 = srv.client()
    for t in TYPES:
        found = r2.execute_command("CBF.MEXISTS", "p:" + t, *["k%d" % i for i in range(2000)])
        assert found == [1] * 2000, t
        assert r2.execute_command("CBF.COUNT", "p:" + t, "k7") >= 2 or t == "morris"


def main():
    from harness import run_steps
    return run_steps(TESTS)


if __name__ == "__main__":
    sys.exit(main())
