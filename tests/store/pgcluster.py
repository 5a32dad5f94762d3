"""A throwaway PostgreSQL cluster for tests.

`require_cluster()` (or `session_cluster()`) gives one started cluster per test session: a
superuser `proctor`, trust over its own Unix socket directory, SCRAM-SHA-256 with
`PASSWORD` over TCP on 127.0.0.1 and a free port, durability off for speed. It is stopped
and removed at exit. PostgreSQL refuses to run as root, so under root (CI) initdb and pg_ctl
run as the `postgres` user, in a temporary directory that user owns.

Outside CI, a machine without PostgreSQL skips the tests that need it, saying why; under
CI=true they fail instead.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time

# /tmp: the postgres user must reach it, and a socket path must stay under ~100 bytes
PREFIX = os.path.join("/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir(), "proctor-pg-")
OWNER = "owner"  # "<pid> <its start time>" of the test process that made the cluster
USER = "proctor"
PASSWORD = "proctor-test-pw"
ADMIN_WAIT = 120.0  # seconds the set-up and clean-up statements may take (see Cluster.execute)

ABSENT_REASON = (
    "PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or on PATH); "
    "install postgresql (Debian: apt-get install postgresql) to run these tests"
)


def find_postgres() -> str | None:
    """The directory of initdb/pg_ctl/postgres: the newest /usr/lib/postgresql/*/bin, else PATH."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    found.sort(key=lambda path: [int(part) if part.isdigit() else 0 for part in path.split("/")[4].split(".")])
    if found:
        return os.path.dirname(found[-1])
    on_path = shutil.which("initdb")
    return os.path.dirname(on_path) if on_path else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Cluster:
    def __init__(self, bindir: str | None = None) -> None:
        self.bindir = bindir or find_postgres()
        if self.bindir is None:
            raise RuntimeError(ABSENT_REASON)
        self.root: str | None = None
        self.port = 0
        self.started = False

    @property
    def datadir(self) -> str:
        return os.path.join(self.root, "data")

    @property
    def socket_dir(self) -> str:
        return os.path.join(self.root, "sock")

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [os.path.join(self.bindir, argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
        proc = subprocess.run(command, cwd=self.root, env=env, capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv[:2])} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}" + self._log_tail()
            )
        return proc

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self.root, "log")) as f:
                return "\n--- server log ---\n" + f.read()[-3000:]
        except OSError:
            return ""

    def start(self) -> "Cluster":
        self.root = tempfile.mkdtemp(prefix=PREFIX, dir=os.path.dirname(PREFIX))
        with open(os.path.join(self.root, OWNER), "w") as f:
            f.write(f"{os.getpid()} {_started(os.getpid())}\n")
        os.mkdir(self.socket_dir)
        pwfile = os.path.join(self.root, "pwfile")
        with open(pwfile, "w") as f:
            f.write(PASSWORD + "\n")
        if os.geteuid() == 0:
            import pwd

            try:
                entry = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError(
                    "running as root, and there is no `postgres` user to run PostgreSQL as "
                    "(PostgreSQL refuses to run as root)"
                ) from None
            for path in (self.root, self.socket_dir, pwfile):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb",
            "-D",
            self.datadir,
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
            "--no-locale",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--no-sync",
            "--no-instructions",
        )
        os.unlink(pwfile)
        with open(os.path.join(self.datadir, "postgresql.conf"), "a") as f:
            f.write(
                f"\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.socket_dir}'\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 200\n"
                "shared_buffers = 32MB\n"
            )
        for attempt in range(3):
            self.port = _free_port()
            proc = self._run(
                "pg_ctl",
                "-D",
                self.datadir,
                "-l",
                os.path.join(self.root, "log"),
                "-w",
                "-t",
                "30",
                "-o",
                f"-p {self.port}",
                "start",
                check=attempt == 2,
            )
            if proc.returncode == 0:
                break
        self.started = True
        return self

    def url(self, db: str = "postgres", tcp: bool = True, user: str = USER, password: str | None = PASSWORD) -> str:
        """TCP: postgresql://proctor:PASSWORD@127.0.0.1:PORT/db (SCRAM). Unix socket: the socket
        directory percent-encoded as the host (trust), no password."""
        if tcp:
            auth = f"{user}:{password}" if password is not None else user
            return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}"
        return f"postgresql://{user}@{self.socket_dir.replace('/', '%2F')}:{self.port}/{db}"

    def execute(self, sql: str, params=(), db: str = "postgres"):
        """One statement as the superuser over the Unix socket; the rows it returned. It waits up
        to ADMIN_WAIT for an answer, not the store's 5 s: this is the tests' own set-up and
        clean-up (a database per test), and on a loaded machine a CREATE or DROP DATABASE queued
        behind other workers' has taken longer than 5 s without anything being wrong."""
        from proctor.store import pgwire

        with pgwire.connect(self.url(db, tcp=False), timeout=ADMIN_WAIT) as conn:
            return conn.execute(sql, params).fetchall()

    def create_database(self, name: str) -> str:
        self.execute(f"CREATE DATABASE {_quote_ident(name)}")
        return name

    def drop_database(self, name: str) -> None:
        self.execute(f"DROP DATABASE IF EXISTS {_quote_ident(name)} WITH (FORCE)")

    def add_hba(self, line: str) -> None:
        """Put a pg_hba.conf line first (first match wins) and reload the configuration."""
        path = os.path.join(self.datadir, "pg_hba.conf")
        with open(path) as f:
            lines = f.read()
        if line not in lines.splitlines():
            with open(path, "w") as f:
                f.write(line + "\n" + lines)
            self.execute("SELECT pg_reload_conf()")
            time.sleep(0.1)  # the postmaster reloads on SIGHUP, asynchronously

    def stop(self) -> None:
        if self.root is None:
            return
        if self.started:
            self._run("pg_ctl", "-D", self.datadir, "-m", "immediate", "-w", "stop", check=False)
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None


def _started(pid: int) -> str:
    """A process's start time in clock ticks since boot (/proc/<pid>/stat field 22), or "" when
    it is gone: with the pid, it names one process, not whichever later reuses the pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def reap_stale() -> list[str]:
    """Stop and remove the clusters whose test process is gone without stopping them (killed:
    its atexit never ran), so a killed run leaves no postgres behind for long. A cluster whose
    owner still runs, or that records no owner (made by an older copy of this module, or being
    made right now), is left alone. Returns the directories removed."""
    removed = []
    for root in glob.glob(PREFIX + "*"):
        try:
            with open(os.path.join(root, OWNER)) as f:
                pid, started = f.read().split()
        except (OSError, ValueError):
            continue
        if _started(int(pid)) == started:
            continue
        stale = Cluster()
        stale.root, stale.started = root, os.path.isdir(os.path.join(root, "data"))
        stale.stop()
        removed.append(root)
    return removed


_session: Cluster | Exception | None = None


def session_cluster() -> Cluster:
    """The cluster shared by the whole test session, started on first use, stopped at exit.
    A cluster that failed to start fails every later call the same way, at once."""
    global _session
    if _session is None:
        reap_stale()
        cluster = Cluster()
        atexit.register(cluster.stop)
        try:
            _session = cluster.start()
        except Exception as exc:
            _session = exc
    if isinstance(_session, Exception):
        raise RuntimeError(f"the test PostgreSQL cluster did not start: {_session}")
    return _session


def require_cluster() -> Cluster:
    """session_cluster(), or skip the test (fail it under CI=true) when PostgreSQL is absent."""
    import pytest

    if find_postgres() is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{ABSENT_REASON}; CI runs the PostgreSQL tests")
        pytest.skip(ABSENT_REASON)
    return session_cluster()
