"""services.py - the two servers of the guard example, started on a scratch
directory: PostgreSQL (initdb + pg_ctl, unix socket only) and
bloomkit-server (a free TCP port, a --dir for its log and snapshots).

Postgres is driven with Debian's `psql` client: `Session` keeps one psql
process open on a pipe and reads each result up to a marker line, so a
lookup costs one round trip to the database, as with a client library.
"""
import glob
import os
import pwd
import signal
import socket
import subprocess
import time

import redis


def pg_bindir():
    """The newest /usr/lib/postgresql/<version>/bin holding initdb, or None."""
    dirs = [d for d in glob.glob("/usr/lib/postgresql/*/bin")
            if os.path.exists(os.path.join(d, "initdb"))]
    dirs.sort(key=lambda d: [int(x) for x in d.split("/")[-2].split(".")
                             if x.isdigit()])
    return dirs[-1] if dirs else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DBError(Exception):
    """The database did not answer (down, connection lost) or refused."""


class Postgres:
    """A throwaway cluster in <root>: data in root/data, socket in root.

    initdb refuses to run as root, so as root every server binary runs as
    Debian's `postgres` user (runuser) on a directory chowned to it."""

    USER = "guard"  # the cluster's superuser (trust auth, socket only)

    def __init__(self, bindir, root):
        self.bin = bindir
        self.root = root
        self.data = os.path.join(root, "data")
        self.as_pg = []
        os.makedirs(root, exist_ok=True)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(root, pw.pw_uid, pw.pw_gid)
            # let the postgres user through the scratch dir above root
            os.chmod(os.path.dirname(root), 0o711)
            self.as_pg = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", self.data, "-U", self.USER, "--auth=trust",
                  "-E", "UTF8", "--no-sync")

    def _run(self, tool, *args):
        out = subprocess.run(self.as_pg + [os.path.join(self.bin, tool), *args],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{tool} failed:\n{out.stdout}")

    def start(self):
        # no TCP at all; fsync off: a scratch cluster (say so in numbers)
        opts = f"-c listen_addresses='' -k {self.root} -c fsync=off"
        self._run("pg_ctl", "-D", self.data, "-l", os.path.join(self.root, "log"),
                  "-w", "-o", opts, "start")

    def stop(self):
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def running(self):
        return os.path.exists(os.path.join(self.data, "postmaster.pid"))

    def psql(self, *args):
        """argv of a psql connected to the cluster (unaligned, tuples only)."""
        return [os.path.join(self.bin, "psql"), "-h", self.root, "-U", self.USER,
                "-d", "postgres", "-X", "-q", "-A", "-t", *args]


class Session:
    """One psql process on a pipe: query(sql) -> list of result lines."""

    END = "__guard_end__"

    def __init__(self, argv):
        self.argv = argv
        self.p = None

    def _open(self):
        self.p = subprocess.Popen(self.argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, bufsize=1)

    def close(self):
        if self.p:
            try:
                self.p.stdin.close()
            except OSError:
                pass
            self.p.kill()
            self.p.wait()
            self.p = None

    def query(self, sql):
        if self.p is None or self.p.poll() is not None:
            self.close()
            self._open()
        lines = []
        try:
            self.p.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo " + self.END + "\n")
            self.p.stdin.flush()
            while True:
                line = self.p.stdout.readline()
                if not line:  # psql exits when it cannot (re)connect
                    raise DBError(" ".join(lines) or "psql exited")
                line = line.rstrip("\n")
                if line == self.END:
                    break
                lines.append(line)
        except OSError as e:  # broken pipe: psql already gone
            self.close()
            raise DBError(str(e))
        except DBError:
            self.close()
            raise
        errors = [l for l in lines if l.startswith(("ERROR:", "FATAL:", "psql:"))]
        if errors:
            raise DBError(errors[0])
        return lines


class Bloomkit:
    """bloomkit-server on a free port with its data in `dir`; restartable on
    the same port and dir (the filters come back from its log and snapshots)."""

    def __init__(self, binary, dir, pidfile=None):
        self.binary = binary
        self.dir = dir
        self.port = free_port()
        self.pidfile = pidfile
        self.proc = None
        os.makedirs(os.path.dirname(dir), exist_ok=True)
        self.start()

    def start(self):
        log = open(os.path.join(os.path.dirname(self.dir), "bloomkit-server.log"), "a")
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--dir", self.dir,
             "--threads", "2"], stdout=log, stderr=log)
        log.close()
        if self.pidfile:
            with open(self.pidfile, "w") as f:
                f.write(f"{self.proc.pid}\n")
        deadline = time.monotonic() + 20
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=1).ping()
                return
            except redis.exceptions.RedisError:
                if self.proc.poll() is not None:
                    raise RuntimeError("bloomkit-server exited at start "
                                       f"(code {self.proc.returncode})")
                if time.monotonic() > deadline:
                    raise RuntimeError("bloomkit-server did not answer PING")
                time.sleep(0.05)

    def kill(self):
        """A crash: SIGKILL, no chance to save."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                redis.Redis(port=self.port, socket_timeout=10).shutdown()
            except redis.exceptions.RedisError:
                pass  # SHUTDOWN closes the connection: redis-py may say so
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
