#!/usr/bin/python3
"""bloomkit.so: SF.* static filters and maps inside Redis (issue 16).

The core checks of tests/server/test_static.py (CLI files pushed with
`bloomkit push` answer SF.EXISTS/MEXISTS/GET/MGET as `bloomkit check` /
`bloomkit get` do on the files; SF.INFO; RESP2/RESP3 types; wrong kinds;
SCANDUMP/LOADCHUNK; corrupt chunks keep the old key; DUMP/RESTORE; pull;
the builds), then the same answers after DEBUG RELOAD (RDB save and load
of the bkstatic- type), SAVE and restart, and an AOF rewrite (its
SF.LOADCHUNK replay).

Run: /usr/bin/python3 tests/module/test_static.py (BLOOMKIT_MODULE,
BLOOMKIT_CLI, and REDIS_SERVER if not /usr/bin/redis-server). Prints
"N passed, M failed".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
from harness import Runner, Server  # noqa: E402
import test_static as st  # noqa: E402  (tests/server, on the path via modutil)


def loaded(srv):
    r = srv.client()
    st.load(srv, r)
    assert r.execute_command("SF.BUILD", "b1", "ITEMS", "z") in (b"OK", True)
    assert r.execute_command("SF.BUILDMAP", "bm", "ITEMS", "a", "1", "b", "200") in (b"OK", True)
    return r


def same_after(r):
    st.answers_equal(r)
    assert r.type("f") == b"bkstatic-" and r.type("m") == b"bkstatic-"
    assert r.execute_command("SF.MEXISTS", "b1", "z") == [1]
    assert r.execute_command("SF.MGET", "bm", "a", "b") == [1, 200]


def core():
    with Server() as srv:
        r = srv.client()
        for fn in (st.pushed_keys_answer_like_the_cli, st.info_fields, st.resp_types,
                   st.wrong_kinds, st.scandump_loadchunk, st.corrupt_chunks,
                   st.pull_round_trip, st.push_replace_is_atomic, st.dump_restore,
                   st.bumped_filter):
            fn(srv, r)
        st.builds(srv, r)
        # (no COMMAND DOCS: the module registers no docs with Redis 7.0)
        try:
            r.execute_command("SF.MGET", "m")
            raise AssertionError("SF.MGET key: no arity error")
        except st.ResponseError as e:
            assert "wrong number of arguments" in str(e), str(e)
        st.built_keys_answer(r)


def aof_replay():
    """Without a rewrite: the SF.LOADCHUNK / SF.BUILD commands as logged."""
    modutil.after_aof_rewrite(Server, loaded, same_after, rewrite=False)


def main():
    run = Runner("module SF")
    try:
        run.check("core SF.* checks", core)
        modutil.reload_checks(run, Server, loaded, same_after)
        run.check("AOF replay", aof_replay)
    finally:
        st.files().close()
    run.finish()


if __name__ == "__main__":
    main()
