"""app.py - the application: user lookups guarded by a Bloom filter.

    lookup(id): ask the filter first; "absent" is certain, so the database
                is not asked. "Maybe" (a present id or a false positive)
                goes to the database, which has the last word.
    insert(id): the filter first, then the row (application writes both).
    delete(id): the row, then the filter's count (counting key; a plain BF
                key forgets nothing: rebuild() does it).

The filter may be down: lookups then go to the database (fail open: no
wrong answer, no protection), and an insert writes its id into the table
guard_outbox in the same transaction as the row. When the filter answers
again, the outbox is replayed into it before it is trusted again, so no id
inserted meanwhile is ever answered "absent". A delete made while the filter
is down is skipped: the id stays in the filter as a false positive (the
safe direction) until the next rebuild.
"""
import subprocess

import redis

from services import DBError, Session

# the commands of the two kinds of key (docs/COMMANDS.md, BF.* and CBF.*)
KINDS = {
    "bf": dict(reserve="BF.RESERVE", add="BF.ADD", madd="BF.MADD",
               exists="BF.EXISTS", mexists="BF.MEXISTS", info="BF.INFO"),
    "cbf": dict(reserve="CBF.RESERVE", add="CBF.ADD", madd="CBF.MADD",
                exists="CBF.EXISTS", mexists="CBF.MEXISTS", info="CBF.INFO",
                delete="CBF.DEL"),
}

BATCH = 1000  # ids per MADD
DEPTH = 16    # MADDs in flight per pipeline round trip


class App:
    def __init__(self, pg, bk_port, kind="cbf", key="users"):
        self.pg = pg
        self.db = Session(pg.psql())
        self.port = bk_port
        self.kind = kind
        self.cmd = KINDS[kind]
        self.key = key
        self.shadow = None      # key being rebuilt: adds go there too
        self.r = None
        self.filter_up = True
        self.db_queries = 0
        self.drained = 0        # ids replayed from the outbox
        self.connect()

    def create_tables(self):
        """The users, and the outbox of ids inserted while the filter was down."""
        self.db.query("CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL)")
        self.db.query("CREATE TABLE guard_outbox (seq bigserial PRIMARY KEY, "
                      "id bigint NOT NULL)")

    # -- the filter --------------------------------------------------------
    def connect(self):
        self.r = redis.Redis(port=self.port, socket_timeout=2,
                             socket_connect_timeout=0.5)

    def filter_call(self, *args):
        """One filter command; None when the filter cannot be reached."""
        try:
            if not self.filter_up:
                self.recover()
            return self.r.execute_command(*args)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            self.filter_up = False
            self.r.connection_pool.disconnect()
            return None

    def recover(self):
        """The filter answers again: replay the outbox before trusting it."""
        self.r.ping()  # raises while it is still down
        rows = self.db.query("SELECT seq, id FROM guard_outbox ORDER BY seq")
        if rows:
            ids = [row.split("|")[1] for row in rows]
            last = rows[-1].split("|")[0]
            for i in range(0, len(ids), BATCH):
                self.r.execute_command(self.cmd["madd"], self.key, *ids[i:i + BATCH])
            self.db.query(f"DELETE FROM guard_outbox WHERE seq <= {last}")
            self.drained += len(ids)
        self.filter_up = True

    def reserve(self, error, capacity, key=None):
        self.r.execute_command(self.cmd["reserve"], key or self.key, error, capacity)

    def load(self, key=None):
        """Stream every id of the table into the filter: COPY TO STDOUT piped
        into pipelined MADD batches (no temporary file). Returns the count."""
        key = key or self.key
        copy = subprocess.Popen(self.pg.psql("-c", "COPY (SELECT id FROM users) TO STDOUT"),
                                stdout=subprocess.PIPE, text=True)
        pipe = self.r.pipeline(transaction=False)
        batch, queued, n = [], 0, 0
        for line in copy.stdout:
            batch.append(line.rstrip("\n"))
            if len(batch) == BATCH:
                pipe.execute_command(self.cmd["madd"], key, *batch)
                n, batch, queued = n + len(batch), [], queued + 1
                if queued == DEPTH:
                    pipe.execute()  # raises on any error reply
                    queued = 0
        if batch:
            pipe.execute_command(self.cmd["madd"], key, *batch)
            n += len(batch)
        pipe.execute()
        if copy.wait() != 0:
            raise DBError("COPY failed")
        return n

    def rebuild(self, error, capacity):
        """A fresh key from the table, swapped in with RENAME: forgets
        deleted ids (and resets a counting key's drift)."""
        tmp = self.key + ":next"
        self.r.delete(tmp)
        self.reserve(error, capacity, tmp)
        self.shadow = tmp  # inserts from now on go to both keys
        try:
            n = self.load(tmp)
            self.r.rename(tmp, self.key)
        finally:
            self.shadow = None
        return n

    # -- the application's operations ---------------------------------------
    def db_lookup(self, id):
        """The query the guard saves: does user `id` exist?"""
        self.db_queries += 1
        return bool(self.db.query(f"SELECT name FROM users WHERE id = {int(id)}"))

    def lookup(self, id):
        """-> (found, how): how is 'filter' (answered absent, no database
        query), 'db' (filter said maybe) or 'failopen' (filter down)."""
        maybe = self.filter_call(self.cmd["exists"], self.key, id)
        if maybe == 0:
            return False, "filter"
        return self.db_lookup(id), ("db" if maybe is not None else "failopen")

    def insert(self, id):
        ok = self.filter_call(self.cmd["add"], self.key, id) is not None
        if ok and self.shadow:
            self.filter_call(self.cmd["add"], self.shadow, id)
        row = f"INSERT INTO users VALUES ({int(id)}, 'user{int(id)}')"
        if ok:
            self.db.query(row)
        else:  # filter down: the outbox carries the id to it later
            self.db.query(f"BEGIN; {row}; INSERT INTO guard_outbox (id) "
                          f"VALUES ({int(id)}); COMMIT")
        return ok

    def delete(self, id):
        self.db.query(f"DELETE FROM users WHERE id = {int(id)}")
        if "delete" in self.cmd:
            self.filter_call(self.cmd["delete"], self.key, id)

    def close(self):
        self.db.close()
