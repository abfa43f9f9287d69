"""A private PostgreSQL cluster with password authentication, for the tests that need one.

The shared test server trusts local connections, so a wrong password cannot be tested on it;
and it must never be crashed, as other tests use it. :func:`private_server` creates a
trust-authenticated instance of its own with ``initdb`` / ``pg_ctl`` (no root needed unless run
as root), which a test may stop with ``-m immediate`` (a server crash).
:func:`private_cluster` creates a cluster of its own with ``pg_createcluster`` (as root), on a
free port, with ``scram-sha-256`` for TCP connections and a small ``max_connections`` (so "too
many clients" can be provoked), starts it with ``pg_ctlcluster`` and drops it afterwards.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

#: The superuser's password on the private cluster: spaces and an '@' on purpose.
PASSWORD = "Right pass@word 1"
VERSION = "15"


@dataclass(frozen=True)
class PrivateCluster:
    """A running private cluster.

    Attributes:
        name: the cluster's name (``pg_lsclusters``).
        port: its TCP port on 127.0.0.1.
        password: the ``postgres`` role's password.
        max_connections: the server's ``max_connections`` (no slots reserved).
    """

    name: str
    port: int
    password: str
    max_connections: int

    def prepend_hba(self, line: str) -> None:
        """Put ``line`` first in the cluster's ``pg_hba.conf`` and reload the server."""
        path = f"/etc/postgresql/{VERSION}/{self.name}/pg_hba.conf"
        with open(path, encoding="utf-8") as f:
            body = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"{line}\n{body}")
        subprocess.run(
            ["pg_ctlcluster", VERSION, self.name, "reload"], check=True, capture_output=True,
            timeout=60,
        )  # fmt: skip

    def kv_dsn(self, password: str | None = None) -> str:
        """A key/value DSN for role ``postgres``, database ``test`` (password quoted)."""
        pw = (self.password if password is None else password).replace("'", "\\'")
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=test password='{pw}'"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def private_cluster(max_connections: int = 6) -> Iterator[PrivateCluster]:
    """Create, start, yield and finally drop a private cluster (skips when it cannot)."""
    if os.geteuid() != 0 or shutil.which("pg_createcluster") is None:
        pytest.skip("a private cluster needs root and pg_createcluster (postgresql-common)")
    name = f"tx{uuid.uuid4().hex[:8]}"
    port = _free_port()
    run = lambda *cmd: subprocess.run(cmd, check=True, capture_output=True, timeout=120)  # noqa: E731
    try:
        run(
            "pg_createcluster", VERSION, name, "-p", str(port),
            "-o", f"max_connections={max_connections}",
            "-o", "superuser_reserved_connections=0",
            "--", "--auth-host=scram-sha-256", "--auth-local=peer",
        )  # fmt: skip
        run("pg_ctlcluster", VERSION, name, "start")
        sql = f"ALTER ROLE postgres PASSWORD '{PASSWORD}'"
        run("su", "postgres", "-c", f'psql -q -p {port} -c "{sql}" -c "CREATE DATABASE test"')
        yield PrivateCluster(
            name=name, port=port, password=PASSWORD, max_connections=max_connections
        )
    finally:
        subprocess.run(
            ["pg_dropcluster", VERSION, name, "--stop"], capture_output=True, timeout=120
        )


def _bindir() -> str:
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0 and os.path.exists(os.path.join(out.stdout.strip(), "initdb")):
            return out.stdout.strip()
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(candidate, "initdb")):
            return candidate
    raise RuntimeError("initdb not found (install the PostgreSQL server binaries)")


@dataclass
class PrivateServer:
    """A PostgreSQL instance of this test alone."""

    bindir: str
    data: str
    port: int
    as_postgres: bool
    settings: tuple[str, ...] = ()

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        cmd = [os.path.join(self.bindir, args[0]), *args[1:]]
        if self.as_postgres:  # initdb and postgres refuse to run as root
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {out.stdout}\n{out.stderr}")

    def start(self) -> None:
        """``pg_ctl start`` (waits until the server accepts connections)."""
        options = " ".join(f"-c {s}" for s in self.settings)
        self._run(
            "pg_ctl",
            "-D",
            self.data,
            "-l",
            os.path.join(self.data, "server.log"),
            "-w",
            "-o",
            f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 {options}",
            "start",
        )

    def crash(self) -> None:
        """``pg_ctl stop -m immediate``: every server process killed at once."""
        self._run("pg_ctl", "-D", self.data, "-w", "stop", "-m", "immediate")

    def stop(self) -> None:
        """``pg_ctl stop -m fast`` (no error when it is not running)."""
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", self.data, "-w", "stop", "-m", "fast")


@contextmanager
def private_server(*settings: str) -> Iterator[PrivateServer]:
    """``initdb`` a trust-authenticated instance into a temporary directory (as the
    ``postgres`` user when run as root), start it on a free port with its socket in its data
    directory and the given ``name=value`` settings, yield it, then stop it and delete it."""
    bindir = _bindir()
    as_postgres = os.geteuid() == 0
    tmp = tempfile.mkdtemp(prefix="tenxgraph-pg-")
    data = os.path.join(tmp, "data")
    os.mkdir(data, 0o700)
    if as_postgres:
        shutil.chown(tmp, "postgres")
        shutil.chown(data, "postgres")
    server = PrivateServer(bindir, data, _free_port(), as_postgres, settings)
    try:
        server._run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync")
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
