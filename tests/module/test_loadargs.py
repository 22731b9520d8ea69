#!/usr/bin/python3
"""bloomkit.so takes RedisBloom's load arguments (ERROR_RATE, INITIAL_SIZE,
CF_MAX_EXPANSIONS, and Redis 8's bf-*/cf-* names) as the defaults of filters
created without settings, so a redis.conf written for RedisBloom loads; a
bad argument stops the load with a log line naming it. BF_GROWABLE (ours)
turns growable BF keys off."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modutil  # noqa: E402

modutil.require()
import redis  # noqa: E402
from harness import Runner, Server  # noqa: E402


class ArgsServer(Server):
    """redis-server with bloomkit.so and load arguments after its path."""

    def __init__(self, modargs, *flags, **kw):
        self.modargs = list(modargs)
        super().__init__(*flags, **kw)

    def redis_command_line(self):
        cmd = super().redis_command_line()
        i = cmd.index("--loadmodule")
        return cmd[:i + 2] + self.modargs + cmd[i + 2:]


def info_map(r, *args):
    reply = r.execute_command(*args)
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[0::2], reply[1::2]))


def redisbloom_names():
    with ArgsServer(["ERROR_RATE", "0.001", "INITIAL_SIZE", "5000",
                     "CF_MAX_EXPANSIONS", "2"]) as srv:
        r = srv.client()
        r.execute_command("BF.ADD", "b", "x")
        info = info_map(r, "BF.INFO", "b")
        assert info[b"Capacity"] == 5000, info
        # 0.001 at 5000 items needs more bits than the default 0.01 would
        with ArgsServer([]) as plain:
            p = plain.client()
            p.execute_command("BF.RESERVE", "b", "0.01", "5000")
            assert info[b"Size"] > info_map(p, "BF.INFO", "b")[b"Size"]
            assert plain.stop() == 0
        # BF.RESERVE with its own settings is unaffected
        r.execute_command("BF.RESERVE", "own", "0.1", "10")
        assert info_map(r, "BF.INFO", "own")[b"Capacity"] == 10
        # a cuckoo chain stops at 2 stages
        r.execute_command("CF.RESERVE", "c", "4", "BUCKETSIZE", "2", "EXPANSION", "1")
        err = None
        for i in range(200):
            try:
                r.execute_command("CF.ADD", "c", "i%d" % i)
            except redis.exceptions.ResponseError as e:
                err = str(e)
                break
        assert err and "Maximum expansions" in err, err
        assert info_map(r, "CF.INFO", "c")[b"Number of filters"] == 2
        assert srv.stop() == 0


def redis8_names():
    with ArgsServer(["bf-error-rate", "0.05", "bf-initial-size", "777",
                     "cf-initial-size", "2048", "cf-bucket-size", "4"]) as srv:
        r = srv.client()
        r.execute_command("BF.ADD", "b", "x")
        assert info_map(r, "BF.INFO", "b")[b"Capacity"] == 777
        r.execute_command("CF.ADD", "c", "x")
        ci = info_map(r, "CF.INFO", "c")
        assert ci[b"Bucket size"] == 4, ci
        assert ci[b"Number of buckets"] * 4 >= 2048, ci
        assert srv.stop() == 0


def growable_setting():
    """BF_GROWABLE 0: BF.ADD makes RedisBloom's 240-byte chain; by default a
    growable filter (one line per lookup). CF_GROWABLE 0: CF.ADD makes
    RedisBloom's chain; by default a growable filter (expansion 2)."""
    for args, growable in ((["BF_GROWABLE", "0"], False), (["bf-growable", "1"], True),
                           ([], True)):
        with ArgsServer(args) as srv:
            r = srv.client()
            r.execute_command("BF.ADD", "b", "x")
            size = info_map(r, "BF.INFO", "b")[b"Size"]
            assert (size != 240) == growable, (args, size)
            assert srv.stop() == 0
    # CF_GROWABLE 0: CF.ADD makes RedisBloom's chain of 1024-item stages
    for args, growable in ((["CF_GROWABLE", "0"], False), (["cf-growable", "1"], True),
                           ([], True)):
        with ArgsServer(args) as srv:
            r = srv.client()
            r.execute_command("CF.ADD", "c", "x")
            got = info_map(r, "CF.INFO", "c")
            assert (got[b"Expansion rate"] == 2) == growable, (args, got)
            assert srv.stop() == 0


def bad_arguments():
    for args, text in ((["ERROR_RATE", "2"], "ERROR_RATE"),
                       (["BF_GROWABLE", "2"], "BF_GROWABLE"),
                       (["CF_GROWABLE", "-1"], "CF_GROWABLE"),
                       (["INITIAL_SIZE"], "pairs"),
                       (["NOSUCH", "1"], "unknown load argument 'NOSUCH'"),
                       (["INITIAL_SIZE", "ten"], "INITIAL_SIZE"),
                       (["CF_BUCKET_SIZE", "3"], "CF_BUCKET_SIZE")):
        srv = ArgsServer(args, wait=False)
        with srv:
            rc = srv.proc.wait(timeout=30)
            assert rc != 0, (args, rc)
            assert text in srv.log(), (args, srv.log()[-1500:])


def main():
    run = Runner("module load arguments")
    run.check("RedisBloom's ERROR_RATE, INITIAL_SIZE, CF_MAX_EXPANSIONS", redisbloom_names)
    run.check("Redis 8's bf-*/cf-* names", redis8_names)
    run.check("BF_GROWABLE, CF_GROWABLE 0 / 1", growable_setting)
    run.check("bad arguments stop the load, named in the log", bad_arguments)
    run.finish()


if __name__ == "__main__":
    main()
