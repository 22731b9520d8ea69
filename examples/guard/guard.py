"""guard.py - a Bloom filter guarding PostgreSQL against lookups of ids that
do not exist (cache penetration). Run it through run.sh (README.md).

Starts PostgreSQL and bloomkit-server in --scratch, fills a table of --ids
users, streams it into the filter, then measures a load of --queries
lookups (--absent of them for ids that do not exist) with and without the
guard, crashes and restarts bloomkit-server mid-run, restarts Postgres,
inserts and deletes through the application, and prints the numbers. Every
claim is checked; the exit code is 1 when one fails.
"""
import argparse
import math
import os
import random
import signal
import subprocess
import sys
import time

from app import App, KINDS
from services import Bloomkit, DBError, Postgres, pg_bindir

ABSENT_BASE = 10**12  # absent ids: never in the table (its ids are 1..N+)


# -- statistics -------------------------------------------------------------
def binom_bounds(n, p, alpha=1e-6):
    """(lo, hi): a Binomial(n, p) count falls outside [lo, hi] with
    probability under 2 x alpha (exact tails, summed in log space)."""
    if p <= 0:
        return 0, 0
    logpmf = lambda k: (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                        + k * math.log(p) + (n - k) * math.log1p(-p))
    lo, acc = 0, 0.0
    while lo < n and acc + math.exp(logpmf(lo)) < alpha:
        acc += math.exp(logpmf(lo))
        lo += 1
    hi, acc = n, 0.0
    while hi > 0 and acc + math.exp(logpmf(hi)) < alpha:
        acc += math.exp(logpmf(hi))
        hi -= 1
    return lo, hi


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


# -- the report and its checks ---------------------------------------------
class Report:
    def __init__(self):
        self.rows, self.failed = [], []

    def row(self, what, *values):
        self.rows.append((what, values))

    def check(self, name, ok, detail=""):
        print(f"  [{'ok' if ok else 'FAIL'}] {name}" + (f": {detail}" if detail else ""),
              flush=True)
        if not ok:
            self.failed.append(name)

    def table(self, head):
        width = max(len(w) for w, _ in self.rows + [(head[0], ())])
        print()
        print("  ".join([head[0].ljust(width)] + [h.rjust(14) for h in head[1:]]))
        for what, values in self.rows:
            print("  ".join([what.ljust(width)] + [str(v).rjust(14) for v in values]))


def ms(seconds):
    return f"{seconds * 1e3:.3f} ms"


# -- the phases ---------------------------------------------------------------
def count_missing(app):
    """Every id of the table asked of the filter (streamed): how many it
    answers absent. Must be 0: a false negative would hide a real user."""
    copy = subprocess.Popen(app.pg.psql("-c", "COPY (SELECT id FROM users) TO STDOUT"),
                            stdout=subprocess.PIPE, text=True)
    missing, batch = 0, []

    def flush():
        nonlocal missing
        missing += app.r.execute_command(app.cmd["mexists"], app.key, *batch).count(0)
        batch.clear()

    for line in copy.stdout:
        batch.append(line.rstrip("\n"))
        if len(batch) == 1000:
            flush()
    if batch:
        flush()
    copy.wait()
    return missing


def workload(n_ids, queries, absent_share, rng):
    """[(id, present)]: present ids drawn from 1..n_ids, absent ids distinct
    (each absent id tests the filter once: the false positives of distinct
    ids are independent draws at the filter's rate)."""
    n_absent = sum(rng.random() < absent_share for _ in range(queries))
    absent = [ABSENT_BASE + i for i in rng.sample(range(100 * queries), n_absent)]
    reqs = [(rng.randint(1, n_ids), True) for _ in range(queries - n_absent)]
    reqs += [(a, False) for a in absent]
    rng.shuffle(reqs)
    return reqs


class Tally:
    def __init__(self):
        self.lat = {True: [], False: []}   # by present
        self.how = {"filter": 0, "db": 0, "failopen": 0}
        self.absent = self.fp = self.wrong = self.seconds = self.db = 0
        self.pg = 0  # index lookups on users that Postgres counted meanwhile

    def run(self, app, reqs, guarded):
        t0, db0 = time.perf_counter(), app.db_queries
        for id, present in reqs:
            t = time.perf_counter()
            if guarded:
                found, how = app.lookup(id)
            else:
                found, how = app.db_lookup(id), "db"
            self.lat[present].append(time.perf_counter() - t)
            self.how[how] += 1
            self.wrong += found != present
            if not present:
                self.absent += 1
                self.fp += how == "db"  # the filter said maybe: a false positive
        self.seconds += time.perf_counter() - t0
        self.db += app.db_queries - db0  # queries that reached the database
        return self


def alternate(app, reqs, base, guard, chunk=500):
    """The same lookups without and with the guard, in alternate chunks:
    the load of a shared machine, which changes by the second, then falls
    on both columns alike."""
    for i in range(0, len(reqs), chunk):
        for tally, guarded in ((base, False), (guard, True)):
            before = index_scans(app)  # Postgres's own count, outside the timing
            tally.run(app, reqs[i:i + chunk], guarded)
            after = index_scans(app)
            if None in (before, after, tally.pg):
                tally.pg = None
            else:
                tally.pg += after - before


def index_scans(app):
    """Postgres's own count of index lookups on users (pg_stat_user_tables),
    flushed first (PostgreSQL 15+; None before)."""
    try:
        app.db.query("SELECT pg_stat_force_next_flush()")
        return int(app.db.query("SELECT idx_scan FROM pg_stat_user_tables "
                                "WHERE relname = 'users'")[0])
    except DBError:
        return None


def info(app, field):
    return app.r.execute_command(app.cmd["info"], app.key, field)[0]


def predicted_rate(app):
    """A BF chain's rate from BF.DEBUG (bits m, hashes k, items n of every
    stage): 1 - prod(1 - (1 - e^(-kn/m))^k). None for other kinds."""
    if app.kind != "bf":
        return None
    keep = 1.0
    for line in app.r.execute_command("BF.DEBUG", app.key)[1:]:
        f = dict(x.split(":") for x in line.decode().split())
        m, k, n = int(f["bits"]), int(f["hashes"]), int(f["size"])
        keep *= 1 - (1 - math.exp(-k * n / m)) ** k
    return 1 - keep


def main():
    ap = argparse.ArgumentParser(
        prog="run.sh", description="A Bloom filter (bloomkit-server) guarding "
        "PostgreSQL against lookups of ids that do not exist; README.md.")
    ap.add_argument("--ids", type=int, default=100000, help="users in the table")
    ap.add_argument("--queries", type=int, default=20000, help="lookups per run")
    ap.add_argument("--absent", type=float, default=0.5, help="share of absent ids")
    ap.add_argument("--error", type=float, default=0.01, help="filter's error rate")
    ap.add_argument("--capacity", type=int, help="filter's capacity (default --ids)")
    ap.add_argument("--filter", choices=sorted(KINDS), default="cbf",
                    help="cbf: counting key, deletes with CBF.DEL; bf: BF key, "
                         "deletes by periodic rebuild")
    ap.add_argument("--changes", type=int, default=50, help="ids inserted / deleted")
    ap.add_argument("--seed", type=int, default=35, help="of the workload")
    ap.add_argument("--scratch", required=True, help="scratch dir (run.sh makes it)")
    ap.add_argument("--pg-bindir", default=pg_bindir(), help="PostgreSQL's binaries")
    ap.add_argument("--server", default=os.environ.get("BLOOMKIT_SERVER"),
                    help="bloomkit-server binary (run.sh: $BLOOMKIT_SERVER)")
    a = ap.parse_args()
    capacity = a.capacity or a.ids
    rng = random.Random(a.seed)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally

    rep = Report()
    pg = bk = app = None
    try:
        # -- start both sides -------------------------------------------------
        t = time.perf_counter()
        pg = Postgres(a.pg_bindir, os.path.join(a.scratch, "pg"))
        pg.start()
        bk = Bloomkit(a.server, os.path.join(a.scratch, "bk", "data"),
                      pidfile=os.path.join(a.scratch, "bloomkit.pid"))
        print(f"PostgreSQL ({a.pg_bindir}) and bloomkit-server (port {bk.port}) "
              f"up in {time.perf_counter() - t:.1f} s", flush=True)
        app = App(pg, bk.port, a.filter)
        app.create_tables()
        t = time.perf_counter()
        app.db.query(f"INSERT INTO users SELECT g, 'user' || g FROM generate_series(1, {a.ids}) g")
        app.db.query("VACUUM ANALYZE users")
        print(f"table users: {a.ids} rows in {time.perf_counter() - t:.1f} s", flush=True)

        # -- the filter, streamed from the table ------------------------------
        app.reserve(a.error, capacity)
        t = time.perf_counter()
        loaded = app.load()
        load_s = time.perf_counter() - t
        size = info(app, "SIZE")
        print(f"filter {app.key} ({a.filter}, error {a.error}, capacity {capacity}): "
              f"{loaded} ids streamed in {load_s:.2f} s, {size} bytes "
              f"({8 * size / capacity:.2f} bits per id)", flush=True)
        pkey = int(app.db.query("SELECT pg_relation_size('users_pkey')")[0])
        print(f"(for scale: the table's primary-key index takes {pkey} bytes)", flush=True)
        rep.check("the loader streamed every row", loaded == a.ids, f"{loaded} of {a.ids}")
        missing = count_missing(app)
        rep.check("every id of the table is in the filter (no false negative)",
                  missing == 0, f"{missing} missing")

        # -- the load: without and with the guard ---------------------------------
        reqs = workload(a.ids, a.queries, a.absent, rng)
        half = len(reqs) // 2
        print(f"\nload: {len(reqs)} lookups, {a.absent:.0%} for absent ids, without and "
              "with the guard in alternate chunks of 500", flush=True)
        base, guard = Tally(), Tally()
        alternate(app, reqs[:half], base, guard)

        # -- bloomkit-server crashes mid-run (SIGKILL) and comes back --------------
        items = info(app, "ITEMS")
        bk.kill()
        few = reqs[:200]  # the lookups made while one side is down
        down = Tally().run(app, few, guarded=True)
        late_id = a.ids + 1  # inserted while the filter is down: via the outbox
        app.insert(late_id)
        outbox = int(app.db.query("SELECT count(*) FROM guard_outbox")[0])
        t = time.perf_counter()
        bk.start()
        restart_s = time.perf_counter() - t
        items_back = info(app, "ITEMS")  # before the app replays its outbox
        late_fp = app.r.execute_command(app.cmd["exists"], app.key, late_id)
        missing_back = count_missing(app)
        late_found, late_how = app.lookup(late_id)  # the app reconnects, replays
        late_in = app.r.execute_command(app.cmd["exists"], app.key, late_id)
        print(f"\nbloomkit-server killed (SIGKILL) and restarted in {restart_s:.2f} s", flush=True)
        rep.check("filter down: lookups fail open to the database, all right",
                  down.how["failopen"] == len(few) and down.wrong == 0,
                  f"{down.how['failopen']} of {len(few)} to the database, {down.wrong} wrong")
        rep.check("filter down: the insert went to the outbox", outbox == 1, f"{outbox} row")
        rep.check("restarted filter has its data back (items, no false negative)",
                  items_back == items and missing_back == 1 - late_fp,
                  f"items {items_back} (before: {items}), {missing_back} table id "
                  "missing (the one inserted while it was down)")
        rep.check("outbox replayed on reconnect: id inserted while down is found",
                  late_found and late_in == 1 and app.drained == 1,
                  f"found={late_found} via {late_how}, filter says {late_in}, "
                  f"{app.drained} replayed")

        alternate(app, reqs[half:], base, guard)
        rep.check("without guard: every answer right", base.wrong == 0, f"{base.wrong} wrong")
        guarded_db = guard.db
        rep.check("with guard: every answer right (no false negative)",
                  guard.wrong == 0, f"{guard.wrong} wrong")
        rep.check("database queries avoided == absent ids answered absent",
                  guard.how["filter"] == guard.absent - guard.fp
                  and guarded_db == len(reqs) - guard.how["filter"],
                  f"{guard.how['filter']} avoided, {guard.absent} absent - {guard.fp} "
                  f"false positives; {guarded_db} queries reached the database")
        if base.pg is not None and guard.pg is not None:
            rep.check("Postgres counted the same queries (pg_stat_user_tables.idx_scan)",
                      base.pg == base.db and guard.pg == guard.db,
                      f"without guard {base.pg}, with guard {guard.pg}")
        rate = guard.fp / max(1, guard.absent)
        lo, hi = binom_bounds(guard.absent, a.error)
        rep.check(f"false positives within the configured rate {a.error}",
                  guard.fp <= hi, f"{guard.fp} of {guard.absent} ({rate:.3%}); "
                  f"at most {hi} (Binomial({guard.absent}, {a.error}), P < 1e-6)")
        expect = predicted_rate(app)
        if expect is not None:
            lo, hi = binom_bounds(guard.absent, expect)
            rep.check(f"false positives as BF.DEBUG's shape predicts ({expect:.3%})",
                      lo <= guard.fp <= hi, f"{guard.fp} in [{lo}, {hi}]")

        # -- Postgres restarts: absent ids are still answered ------------------
        pg.stop()
        pg_down = {"answered absent": 0, "database unavailable": 0, "wrong": 0}
        for id, present in few:
            try:
                found, how = app.lookup(id)
                pg_down["answered absent"] += how == "filter"
                pg_down["wrong"] += found != present
            except DBError:
                pg_down["database unavailable"] += 1
        absent_few = sum(not p for _, p in few)
        t = time.perf_counter()
        pg.start()
        pg_restart_s = time.perf_counter() - t
        after = Tally().run(app, few, guarded=True)
        print(f"\nPostgreSQL stopped, {len(few)} lookups, restarted in {pg_restart_s:.2f} s", flush=True)
        rep.check("Postgres down: the guard still answers absent ids",
                  pg_down["answered absent"] == absent_few - down_fp(few, app)
                  and pg_down["wrong"] == 0
                  and pg_down["answered absent"] + pg_down["database unavailable"] == len(few),
                  f"{pg_down['answered absent']} of {absent_few} absent answered, "
                  f"{pg_down['database unavailable']} needed the database")
        rep.check("Postgres back: lookups answered again", after.wrong == 0,
                  f"{after.wrong} wrong of {len(few)}")

        # -- inserts and deletes through the application -----------------------
        new = list(range(a.ids + 2, a.ids + 2 + a.changes))
        for id in new:
            app.insert(id)
        found_new = sum(app.lookup(id)[0] for id in new)
        rep.check("ids inserted through the app are found", found_new == len(new),
                  f"{found_new} of {len(new)}")
        gone = rng.sample(range(1, a.ids + 1), a.changes)
        for id in gone:
            app.delete(id)
        still = sum(app.r.execute_command(app.cmd["mexists"], app.key, *gone))
        if a.filter == "bf":  # a Bloom filter forgets nothing: rebuild it
            rep.check("BF key: deleted ids still answer maybe before the rebuild",
                      still == len(gone), f"{still} of {len(gone)}")
            t = time.perf_counter()
            rebuilt = app.rebuild(a.error, capacity)
            print(f"\nrebuild: {rebuilt} ids into {app.key}:next, RENAMEd over "
                  f"{app.key}, in {time.perf_counter() - t:.2f} s", flush=True)
            still = sum(app.r.execute_command(app.cmd["mexists"], app.key, *gone))
        _, hi = binom_bounds(len(gone), a.error)
        rep.check("deleted ids are gone from the filter",
                  still <= hi, f"{still} of {len(gone)} still maybe (false "
                  f"positives; at most {hi})")
        wrong = sum(app.lookup(id)[0] for id in gone)
        rep.check("deleted ids are answered absent", wrong == 0, f"{wrong} found")
        missing = count_missing(app)
        rep.check("after the changes every table id is still in the filter",
                  missing == 0, f"{missing} missing")

        # -- a clean restart (SHUTDOWN: snapshot) keeps the changes too ---------
        items = info(app, "ITEMS")
        bk.stop()
        bk.start()
        missing = count_missing(app)
        still_back = sum(app.r.execute_command(app.cmd["mexists"], app.key, *gone))
        print("\nbloomkit-server stopped (SHUTDOWN) and started again", flush=True)
        rep.check("after a clean restart: same items, no false negative, "
                  "deleted ids still gone", info(app, "ITEMS") == items and missing == 0
                  and still_back == still, f"items {info(app, 'ITEMS')} (before: {items}), "
                  f"{missing} missing, {still_back} deleted ids maybe")

        # -- the numbers ---------------------------------------------------------
        rep.row("lookups", len(reqs), len(reqs))
        rep.row("absent ids asked", base.absent, guard.absent)
        rep.row("database queries", base.how["db"], guarded_db)
        rep.row("queries avoided", 0, guard.how["filter"])
        rep.row("false positives (to the db)", "-", f"{guard.fp} ({rate:.3%})")
        for present, what in ((False, "absent"), (True, "present")):
            rep.row(f"p50 latency, {what} ids", ms(pct(base.lat[present], .5)),
                    ms(pct(guard.lat[present], .5)))
            rep.row(f"p99 latency, {what} ids", ms(pct(base.lat[present], .99)),
                    ms(pct(guard.lat[present], .99)))
        rep.row("lookups per second", f"{len(reqs) / base.seconds:.0f}",
                f"{len(reqs) / guard.seconds:.0f}")
        rep.table(["", "without guard", "with guard"])
        print(f"\nconfigured error {a.error}"
              + (f", BF.DEBUG predicts {expect:.3%}" if expect is not None else "")
              + f", measured {rate:.3%}; filter {size} bytes for capacity {capacity}")
        print(f"bloomkit-server killed mid-run: {down.how['failopen']} lookups failed "
              f"open to the database; back in {restart_s:.2f} s with {items_back} items; "
              f"{app.drained} id replayed from the outbox")
        print(f"PostgreSQL stopped: {pg_down['answered absent']} of {absent_few} absent "
              f"ids answered by the guard, {pg_down['database unavailable']} lookups "
              f"failed (database down); back in {pg_restart_s:.2f} s")
    finally:
        if app:
            app.close()
        if bk:
            bk.stop()
        if pg and pg.running():
            pg.stop()

    print(f"\n{len(rep.failed)} check(s) failed" if rep.failed else "\nall checks passed")
    return 1 if rep.failed else 0


def down_fp(reqs, app):
    """False positives among the absent ids of reqs (asked of the filter)."""
    absent = [id for id, p in reqs if not p]
    return sum(app.r.execute_command(app.cmd["mexists"], app.key, *absent)) if absent else 0


if __name__ == "__main__":
    sys.exit(main())
