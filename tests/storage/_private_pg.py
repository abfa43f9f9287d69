"""A private PostgreSQL cluster with password authentication, for the tests that need one.

The shared test server trusts local connections, so a wrong password cannot be tested on it.
:func:`private_cluster` creates a cluster of its own with ``pg_createcluster`` (as root), on a
free port, with ``scram-sha-256`` for TCP connections and a small ``max_connections`` (so "too
many clients" can be provoked), starts it with ``pg_ctlcluster`` and drops it afterwards.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
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
