"""A throwaway PostgreSQL server for the test session: a fresh cluster (initdb) in a temp directory,
one `postgres` process on a free loopback port, one database; stopped and removed at the end.

PostgreSQL refuses to run as root, so as root every PostgreSQL program runs as the `postgres` user
(through runuser) and the directory belongs to that user; any other user runs them as itself. The
programs come from Debian's `postgresql` package (deploy/bootstrap.sh --tests installs it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from sluiceway_server.embedded import ManagedProcess, free_port, spawn, wait_for_port

# Overrides where the PostgreSQL programs are looked for (a directory holding initdb and postgres).
BIN_DIR_ENV = "SLUICEWAY_POSTGRES_BIN"
# Debian puts each major version's programs in /usr/lib/postgresql/VERSION/bin.
DEBIAN_LIB = Path("/usr/lib/postgresql")
SERVER_USER = "postgres"
DATABASE = "sluiceway"
HOST = "127.0.0.1"


def _has_programs(directory: Path) -> bool:
    return all(os.access(directory / name, os.X_OK) for name in ("initdb", "postgres"))


def _version_key(directory: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", directory.parent.name)) or (0,)


def find_bin_dir() -> Path | None:
    """The directory of initdb and postgres: the override, else Debian's highest version, else
    wherever `initdb` on PATH really lives (a symlink is followed to its directory)."""
    override = os.environ.get(BIN_DIR_ENV)
    if override:
        return Path(override) if _has_programs(Path(override)) else None
    versions = sorted((d for d in DEBIAN_LIB.glob("*/bin") if _has_programs(d)), key=_version_key)
    if versions:
        return versions[-1]
    initdb = shutil.which("initdb")
    if initdb is not None:
        directory = Path(initdb).resolve().parent
        if _has_programs(directory):
            return directory
    return None


@dataclass
class PostgresServer:
    """A running server and how to reach it."""

    host: str
    port: int
    database: str
    user: str
    managed: ManagedProcess
    base_dir: Path
    _as_user: tuple[str, ...]
    _bin_dir: Path

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"

    @property
    def conninfo(self) -> str:
        return f"host={self.host} port={self.port} dbname={self.database} user={self.user}"

    def connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        """A new autocommit connection to the database; the caller closes it."""
        return psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """Run one statement in its own connection (committed) and return its rows, if it has any."""
        with self.connect() as connection, connection.cursor() as cursor:
            # As bytes: psycopg's types accept only literal strings, and these are the tests' own SQL.
            cursor.execute(sql.encode(), params)
            return cursor.fetchall() if cursor.description is not None else []

    def stop(self) -> None:
        """A fast shutdown (open sessions are ended), then the directory goes."""
        if self.managed.process.poll() is None:
            argv = [*self._as_user, str(self._bin_dir / "pg_ctl"), "stop", "-D", str(self.base_dir / "data")]
            argv += ["-m", "fast", "-w", "-t", "30"]
            subprocess.run(
                argv,
                capture_output=True,
                timeout=40,
                check=False,
            )
        self.managed.stop(timeout=15)
        shutil.rmtree(self.base_dir, ignore_errors=True)


def start_postgres(log_dir: Path, bin_dir: Path, timeout: float = 30.0) -> PostgresServer:
    """initdb in a new temp directory, start the server on a free port and create the database."""
    as_root = os.geteuid() == 0
    as_user: tuple[str, ...] = ("runuser", "-u", SERVER_USER, "--") if as_root else ()
    user = SERVER_USER if as_root else _current_user()
    base = Path(tempfile.mkdtemp(prefix="sluiceway-postgres-"))
    data, sockets = base / "data", base / "sockets"
    sockets.mkdir()
    if as_root:
        for directory in (base, sockets):
            shutil.chown(directory, SERVER_USER)
    managed: ManagedProcess | None = None
    try:
        initdb = [*as_user, str(bin_dir / "initdb"), "-A", "trust", "-U", user, "-D", str(data)]
        initdb += ["-E", "UTF8", "--no-sync", "--no-instructions"]
        subprocess.run(
            initdb,
            capture_output=True,
            check=True,
            timeout=120,
        )
        port = free_port()
        # fsync off: the data is thrown away, and a test need not wait for the disk.
        server_argv = [*as_user, str(bin_dir / "postgres"), "-D", str(data), "-p", str(port)]
        server_argv += ["-k", str(sockets), "-h", HOST, "-c", "fsync=off", "-c", "synchronous_commit=off"]
        managed = spawn("postgres", server_argv, log_dir)
        server = PostgresServer(HOST, port, "postgres", user, managed, base, as_user, bin_dir)
        wait_for_port(HOST, port, timeout, managed.process)
        _wait_accepting(server, timeout)
        server.execute(f"CREATE DATABASE {DATABASE}")
        server.database = DATABASE
        return server
    except BaseException as exc:
        tail = managed.tail() if managed is not None else ""
        if managed is not None:
            managed.stop(timeout=15)
        shutil.rmtree(base, ignore_errors=True)
        if isinstance(exc, subprocess.CalledProcessError):
            output = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
            raise RuntimeError(f"PostgreSQL did not start: {exc}\n{output}{tail}") from exc
        if isinstance(exc, Exception):
            raise RuntimeError(f"PostgreSQL did not start: {exc}\n{tail}") from exc
        raise


def _current_user() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def _wait_accepting(server: PostgresServer, timeout: float) -> None:
    """The port opens before the server accepts sessions (it may still be starting up)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            server.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline or server.managed.process.poll() is not None:
                raise
            time.sleep(0.1)
