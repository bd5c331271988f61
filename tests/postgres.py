"""A throwaway PostgreSQL server for the tests: a fresh cluster in a temporary folder,
reached only through a unix socket in that folder (no TCP port to collide with), stopped
and deleted when the test session ends.

Its binaries (initdb, pg_ctl, postgres) come from PATH or Debian's /usr/lib/postgresql/*/bin;
.ci/run installs Debian's ``postgresql`` package where they are missing. Without them the
tests that use the server fail, saying so: they never skip, since the gradebook's
PostgreSQL path would then go untested without anyone noticing.

PostgreSQL refuses to run as root, so under root the server runs as ``nobody``, which
owns the cluster's folder.
"""
from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")
SUPERUSER = "grader"
INSTALL_HINT = ("install PostgreSQL's server (Debian: apt-get install postgresql; "
                ".ci/run does this)")


def _major(bindir: Path) -> int:
    name = bindir.parent.name                     # /usr/lib/postgresql/<major>/bin
    return int(name) if name.isdigit() else 0


def find_binaries() -> Path:
    """The folder holding initdb, pg_ctl and postgres: where PATH's pg_ctl really lives,
    else the newest /usr/lib/postgresql/<major>/bin."""
    candidates = []
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_major, reverse=True)
    for folder in candidates:
        if all((folder / name).is_file() for name in SERVER_BINARIES):
            return folder
    pytest.fail(f"the gradebook's PostgreSQL tests need a PostgreSQL server, and none was found "
                f"(no {', '.join(SERVER_BINARIES)} on PATH or in /usr/lib/postgresql/*/bin): "
                f"{INSTALL_HINT}", pytrace=False)


class Server:
    """One cluster: ``start()``, ``new_database(name)`` for a URL, ``stop()``."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.as_root = os.geteuid() == 0
        # Under root the folder must be reachable by nobody: /tmp is, whatever TMPDIR says.
        self.root = Path(tempfile.mkdtemp(prefix="grader-pg-",
                                          dir="/tmp" if self.as_root else None))
        self.data, self.socket = self.root / "data", self.root / "socket"
        self.log = self.root / "server.log"
        self.pid: int | None = None
        self._owner = os.getpid()         # a forked test process must never stop the server
        self.socket.mkdir()
        if self.as_root:
            nobody = pwd.getpwnam("nobody")
            for path in (self.root, self.socket):
                os.chown(path, nobody.pw_uid, nobody.pw_gid)
            self._prefix = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                            "--clear-groups"]
        else:
            self._prefix = []
        # PG* variables (PGDATA, PGPORT, PGHOST, ...) must not point these tools elsewhere.
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        self._env["LC_ALL"] = "C"

    def _run(self, tool: str, *args: str) -> None:
        cmd = [*self._prefix, str(self.bindir / tool), *args]
        p = subprocess.run(cmd, cwd=self.root, env=self._env, capture_output=True, text=True,
                           timeout=120)
        if p.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            pytest.fail(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}\n{log}",
                        pytrace=False)

    def start(self) -> "Server":
        # UTF8 whatever the machine's locale: a C-locale cluster would be SQL_ASCII.
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
                  "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = ''\n"                 # the socket only
                       f"unix_socket_directories = '{self.socket}'\n"
                       f"fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
        atexit.register(self.stop)        # also if the session ends without its teardown
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log))
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])
        return self

    def _admin(self):
        try:
            import psycopg
        except ImportError:
            pytest.fail("the PostgreSQL driver is missing: pip install -e '.[test]' "
                        "(it brings psycopg)", pytrace=False)
        return psycopg.connect(host=str(self.socket), user=SUPERUSER, dbname="postgres",
                               autocommit=True)

    def new_database(self, name: str) -> str:
        """A fresh empty database and its SQLAlchemy URL. Its collation is ICU's English
        one, as on a typical server, not code-point order, so a test sees any order that
        comes from the database instead of from the grader."""
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0 ENCODING \'UTF8\' '
                         f"LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'")
        return f"postgresql+psycopg://{SUPERUSER}@/{name}?host={self.socket}"

    def stop(self) -> None:
        """Stop at once (the data is thrown away), make sure no server process is left,
        delete the folder. Safe to call twice."""
        if os.getpid() != self._owner or not self.root.exists():
            return
        pidfile = self.data / "postmaster.pid"
        if self.pid is None and pidfile.exists():     # pg_ctl start failed, or timed out
            first = pidfile.read_text().split()[:1]
            self.pid = int(first[0]) if first and first[0].isdigit() else None
        try:
            if self.pid is not None:
                subprocess.run([*self._prefix, str(self.bindir / "pg_ctl"), "stop", "-w",
                                "-t", "30", "-m", "immediate", "-D", str(self.data)],
                               cwd=self.root, env=self._env, capture_output=True, timeout=60)
                self._kill_if_alive()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _kill_if_alive(self) -> None:
        # pg_ctl waited for the postmaster, which waits for its children; should it not have,
        # the postmaster is killed, and its children leave when they see it gone.
        for _ in range(100):
            if not _running(self.pid):
                return
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Alive, and not merely a zombie waiting for whoever adopted it to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:                  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


@pytest.fixture(scope="session")
def pg_server():
    """The session's PostgreSQL server (see the module's docstring)."""
    server = Server(find_binaries())
    try:
        yield server.start()
    finally:
        server.stop()


_databases = itertools.count(1)


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the session's server, as a SQLAlchemy URL."""
    return pg_server.new_database(f"gradebook_{next(_databases)}")
