"""Postgres side of the benchmarks: a private database per session, WAL bytes, statements,
commits and round trips counted on the server or on the wire.

* :class:`BenchDatabase` creates ``tenxbench_<random>`` and drops it at the end, so nothing
  is left behind and the server-side counters of that database (``pg_stat_database``,
  ``pg_stat_statements``, the statement log) are ours alone even on a shared server.
* :class:`WalMeter` measures WAL bytes of a batch two ways: the ``pg_current_wal_lsn()``
  difference (cluster-wide, so it includes whatever else the server wrote meanwhile) and, when
  the server's ``pg_wal`` directory and ``pg_waldump`` are readable from here, the bytes of the
  WAL records that touched this database (and the commit records of those transactions), which
  no other client of the server can inflate.
* :class:`StatementCounter` counts statements executed in the bench database with
  ``pg_stat_statements`` when the server has it loaded, else from the server log with
  ``log_statement = 'all'`` set on the counted sessions only (``options`` in their DSN).
* :class:`RoundTripProxy` is a TCP relay between a client and the server that counts
  *turnarounds*: each time the server answers after the client sent something. A request
  pipelined with others (one write, one flush, one wait) counts once, which is exactly what a
  round trip costs.
"""

from __future__ import annotations

import os
import re
import secrets
import selectors
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def admin_dsn(dsn: str) -> str:
    """``dsn`` pointed at the ``postgres`` maintenance database."""
    return make_conninfo(dsn, dbname="postgres")


class BenchDatabase:
    """A private database for one benchmark session (created on enter, dropped on exit).

    Args:
        base_dsn: a DSN of the server (any database; a superuser role for the WAL and
            statement counters).
    """

    def __init__(self, base_dsn: str = DEFAULT_DSN) -> None:
        self.base_dsn = base_dsn
        self.name = f"tenxbench_{secrets.token_hex(4)}"
        self.dsn = make_conninfo(base_dsn, dbname=self.name)
        self.oid: int | None = None
        params = conninfo_to_dict(base_dsn)
        self.host = str(params.get("host") or "localhost")
        self.port = int(params.get("port") or 5432)

    def __enter__(self) -> BenchDatabase:
        with psycopg.connect(admin_dsn(self.base_dsn), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
            self.oid = conn.execute(
                "SELECT oid FROM pg_database WHERE datname = %s", (self.name,)
            ).fetchone()[0]
        return self

    def __exit__(self, *exc: object) -> None:
        self.drop()

    def drop(self) -> None:
        """Drop the database (terminating connections left open); idempotent."""
        with psycopg.connect(admin_dsn(self.base_dsn), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (self.name,),
            )
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}"')

    def admin(self) -> psycopg.Connection:
        """An autocommit connection to the maintenance database (for counters)."""
        return psycopg.connect(admin_dsn(self.base_dsn), autocommit=True)

    def connect(self) -> psycopg.Connection:
        """An autocommit connection to the bench database."""
        return psycopg.connect(self.dsn, autocommit=True)


def server_info(dsn: str) -> dict[str, Any]:
    """Version and durability settings of the server."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        out = {"version": conn.execute("SHOW server_version").fetchone()[0]}
        for name in (
            "fsync",
            "synchronous_commit",
            "full_page_writes",
            "wal_level",
            "shared_buffers",
        ):
            out[name] = conn.execute(f"SHOW {name}").fetchone()[0]
    return out


# -- WAL -----------------------------------------------------------------------------------------
_REC = re.compile(r"len \(rec/tot\):\s*\d+/\s*(\d+), tx:\s*(\d+),")


@dataclass
class WalSample:
    """WAL written during one batch: ``lsn_bytes`` (cluster-wide LSN difference) and
    ``db_bytes`` (records of the bench database only; ``None`` when pg_waldump is unusable)."""

    lsn_bytes: int
    db_bytes: int | None
    start: str
    end: str


class WalMeter:
    """Measures WAL bytes of a batch of work in the bench database.

    Usage::

        start = meter.lsn(); ...work...; end = meter.lsn(); sample = meter.sample(start, end)
    """

    def __init__(self, db: BenchDatabase) -> None:
        self.db = db
        self.conn = db.admin()
        self.waldump, self.wal_dir, self.why_not = self._find_waldump()

    def close(self) -> None:
        self.conn.close()

    def _find_waldump(self) -> tuple[str | None, str | None, str | None]:
        try:
            data_dir = self.conn.execute("SHOW data_directory").fetchone()[0]
            major = self.conn.execute("SHOW server_version_num").fetchone()[0][:2]
        except psycopg.Error as exc:  # not a superuser
            return None, None, f"cannot read data_directory ({type(exc).__name__})"
        wal_dir = os.path.join(data_dir, "pg_wal")
        if not os.access(wal_dir, os.R_OK):
            return None, None, f"{wal_dir} is not readable from this process (remote server?)"
        cands = [shutil.which("pg_waldump"), f"/usr/lib/postgresql/{major}/bin/pg_waldump"]
        try:
            bindir = subprocess.run(
                ["pg_config", "--bindir"], capture_output=True, text=True, check=False
            ).stdout.strip()
            if bindir:
                cands.append(os.path.join(bindir, "pg_waldump"))
        except OSError:
            pass
        for c in cands:
            if c and os.access(c, os.X_OK):
                return c, wal_dir, None
        return None, None, "pg_waldump not found"

    def lsn(self) -> str:
        """The current WAL insert position."""
        return self.conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]

    def sample(self, start: str, end: str) -> WalSample:
        """WAL between two positions, total and attributed to the bench database."""
        lsn_bytes = int(
            self.conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (end, start)).fetchone()[0]
        )
        db = self._dump(start, end)
        return WalSample(lsn_bytes, db[0] if db else None, str(start), str(end))

    def commits(self, start: str, end: str) -> int | None:
        """Transactions that wrote to the bench database and committed between two positions
        (their ``COMMIT`` WAL records), or ``None`` without pg_waldump."""
        db = self._dump(start, end)
        return db[1] if db else None

    def _dump(self, start: str, end: str) -> tuple[int, int] | None:
        """``(bytes, commits)`` of the bench database's WAL records between two positions."""
        if start == end:
            return 0, 0
        if self.waldump is None or self.db.oid is None:
            return None
        proc = subprocess.run(
            [self.waldump, "-p", self.wal_dir, "-s", str(start), "-e", str(end)],
            capture_output=True,
            text=True,
            check=False,
        )
        mark = f"/{self.db.oid}/"
        ours: set[str] = set()
        parsed = []
        for line in proc.stdout.splitlines():
            m = _REC.search(line)
            if not m:
                continue
            tot, tx = int(m.group(1)), m.group(2)
            mine = mark in line and " rel " in line
            commit = line.startswith("rmgr: Transaction") and "COMMIT" in line
            parsed.append((tot, tx, mine, commit))
            if mine and tx != "0":
                ours.add(tx)
        if not parsed:
            self.why_not = (proc.stderr or "pg_waldump printed nothing").strip()[:200]
            return None
        nbytes = sum(tot for tot, tx, mine, _ in parsed if mine or (tx != "0" and tx in ours))
        commits = sum(1 for _, tx, _, commit in parsed if commit and tx in ours)
        return nbytes, commits


# -- statements and commits ---------------------------------------------------------------------
class StatementCounter:
    """Counts statements and commits executed in the bench database.

    ``method`` is ``"pg_stat_statements"``, ``"server log"`` or ``None`` (neither available:
    callers fall back to counting on the wire only).
    """

    def __init__(self, db: BenchDatabase) -> None:
        self.db = db
        self.admin = db.admin()
        self.method: str | None = None
        self.why: list[str] = []
        self._log_path: str | None = None
        self._log_offset = 0
        self._probe()

    def close(self) -> None:
        self.admin.close()

    def _probe(self) -> None:
        with self.db.connect() as conn:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                conn.execute("SELECT count(*) FROM pg_stat_statements")
                self.method = "pg_stat_statements"
                return
            except psycopg.Error as exc:
                self.why.append(f"pg_stat_statements: {str(exc).splitlines()[0]}")
                try:
                    conn.execute("DROP EXTENSION IF EXISTS pg_stat_statements")
                except psycopg.Error:
                    pass
        path = self._find_log()
        if path is not None:
            self._log_path = path
            self.method = "server log (log_statement = all)"

    def _find_log(self) -> str | None:
        cands: list[str] = []
        env = os.environ.get("TENXBENCH_PG_LOG")
        if env:
            cands.append(env)
        try:
            cur = self.admin.execute("SELECT pg_current_logfile()").fetchone()[0]
            if cur:
                cands.append(cur)
            major = self.admin.execute("SHOW server_version_num").fetchone()[0][:2]
            cands.append(f"/var/log/postgresql/postgresql-{major}-main.log")
        except psycopg.Error as exc:
            self.why.append(f"server log: {str(exc).splitlines()[0]}")
            return None
        for c in cands:
            try:
                self.admin.execute("SELECT size FROM pg_stat_file(%s)", (c,)).fetchone()
                return c
            except psycopg.Error:
                continue
        self.why.append("server log: no readable log file (set TENXBENCH_PG_LOG)")
        return None

    def _log_size(self) -> int:
        return int(
            self.admin.execute("SELECT size FROM pg_stat_file(%s)", (self._log_path,)).fetchone()[0]
        )

    def commits(self) -> int:
        """Committed transactions of the bench database so far (pg_stat_database)."""
        self.admin.execute("SELECT pg_stat_clear_snapshot()")
        return int(
            self.admin.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (self.db.name,)
            ).fetchone()[0]
        )

    def dsn(self, base_dsn: str) -> str:
        """The DSN counted clients must use: with the server log method, their sessions log
        every statement (``options=-c log_statement=all``, a superuser setting); with
        pg_stat_statements, ``base_dsn`` unchanged."""
        if self.method is not None and self.method.startswith("server log"):
            return make_conninfo(base_dsn, options="-c log_statement=all")
        return base_dsn

    def start(self) -> None:
        """Begin a counting window."""
        if self.method == "pg_stat_statements":
            self.admin.execute("SELECT pg_stat_statements_reset()")
        elif self._log_path is not None:
            time.sleep(0.2)  # let earlier lines reach the file
            self._log_offset = self._log_size()

    def stop(self) -> dict[str, int] | None:
        """End the window; returns statement counts by first keyword (``None`` if
        unavailable)."""
        if self.method == "pg_stat_statements":
            rows = self.admin.execute(
                "SELECT query, calls FROM pg_stat_statements WHERE dbid = %s", (self.db.oid,)
            ).fetchall()
            out: dict[str, int] = {}
            for query, calls in rows:
                kw = _keyword(query)
                out[kw] = out.get(kw, 0) + int(calls)
            return out
        if self._log_path is None:
            return None
        time.sleep(0.3)  # let the server's stderr reach the file
        end = self._log_size()
        data = b""
        if end > self._log_offset:
            data = self.admin.execute(
                "SELECT pg_read_binary_file(%s, %s, %s)",
                (self._log_path, self._log_offset, end - self._log_offset),
            ).fetchone()[0]
        out = {}
        tag = f"@{self.db.name} "
        lines = bytes(data).decode("utf-8", "replace").splitlines()
        for i, line in enumerate(lines):
            if tag not in line:
                continue
            m = re.search(r"LOG:\s+(?:statement|execute [^:]*):\s*(.*)$", line)
            if not m:
                continue
            text = m.group(1).strip()
            j = i + 1
            while not text and j < len(lines) and not _LOG_PREFIX.match(lines[j]):
                text = lines[j].strip()  # the statement starts on a continuation line
                j += 1
            kw = _keyword(text)
            out[kw] = out.get(kw, 0) + 1
        return out


_LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d ")


def _keyword(sql: str) -> str:
    words = sql.strip().split(None, 1)
    return words[0].upper().rstrip(";") if words else "?"


# -- round trips ------------------------------------------------------------------------------------
class RoundTripProxy:
    """A TCP relay to the Postgres server that counts turnarounds (round trips).

    ``dsn(base)`` gives a DSN that connects through the proxy. ``snapshot()`` returns the
    counters; ``turnarounds`` increases by one each time the server sends data after the client
    sent data since the server's previous answer, per connection.
    """

    def __init__(self, host: str, port: int, protocol: str = "pg") -> None:
        self.target = (host, port)
        #: "pg": also count PostgreSQL frontend messages; "raw": round trips and bytes only.
        self.protocol = protocol
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.turnarounds = 0
        #: client protocol messages by type: Q (simple query), P (parse), B (bind),
        #: E (execute), S (sync), ...
        self.messages: dict[str, int] = {}
        self.trace: list[str] | None = None  # when a list, one entry per turnaround
        self.client_bytes = 0
        self.server_bytes = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._serve, name="rt-proxy", daemon=True)
        self._thread.start()

    def dsn(self, base_dsn: str) -> str:
        """``base_dsn`` through the proxy (no TLS, no GSS encryption: the relay reads the
        protocol)."""
        return make_conninfo(
            base_dsn, host="127.0.0.1", port=str(self.port), sslmode="disable", gssencmode="disable"
        )

    def url(self, redis_url: str) -> str:
        """A ``redis://`` URL through the proxy (same database number)."""
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(redis_url)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(
            (parts.scheme, f"{auth}127.0.0.1:{self.port}", parts.path, parts.query, "")
        )

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {
                "turnarounds": self.turnarounds,
                "client_bytes": self.client_bytes,
                "server_bytes": self.server_bytes,
                "connections": self.connections,
                "statements": self.messages.get("Q", 0) + self.messages.get("E", 0),
                "parses": self.messages.get("P", 0),
                "syncs": self.messages.get("S", 0),
            }

    def close(self) -> None:
        self._stop = True
        self.listener.close()
        self._thread.join(timeout=2)

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        self.listener.setblocking(False)
        sel.register(self.listener, selectors.EVENT_READ, None)
        # per connection: [client_sock, server_sock, client_sent_since_answer]
        while not self._stop:
            try:
                events = sel.select(timeout=0.2)
            except (OSError, ValueError):
                break
            for key, _ in events:
                if key.data is None:
                    try:
                        client, _ = self.listener.accept()
                    except OSError:
                        continue
                    server = socket.create_connection(self.target)
                    for s in (client, server):
                        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        s.setblocking(True)
                    state = {
                        "client": client,
                        "server": server,
                        "pending": False,
                        "buf": b"",
                        "started": False,
                        "batch": [],
                    }
                    sel.register(client, selectors.EVENT_READ, ("c", state))
                    sel.register(server, selectors.EVENT_READ, ("s", state))
                    with self._lock:
                        self.connections += 1
                    continue
                side, state = key.data
                src = key.fileobj
                dst = state["server"] if side == "c" else state["client"]
                try:
                    data = src.recv(1 << 16)  # type: ignore[union-attr]
                except OSError:
                    data = b""
                if not data:
                    for s in (state["client"], state["server"]):
                        try:
                            sel.unregister(s)
                        except (KeyError, ValueError):
                            pass
                        s.close()
                    continue
                with self._lock:
                    if side == "c":
                        self.client_bytes += len(data)
                        state["pending"] = True
                        if self.protocol == "pg":
                            self._parse_client(state, data)
                    else:
                        self.server_bytes += len(data)
                        if state["pending"]:
                            self.turnarounds += 1
                            state["pending"] = False
                            if self.trace is not None:
                                self.trace.append("".join(state["batch"]))
                            state["batch"] = []
                try:
                    dst.sendall(data)
                except OSError:
                    pass
        sel.close()

    def _parse_client(self, state: dict[str, Any], data: bytes) -> None:
        """Count the frontend messages of the PostgreSQL protocol in ``data``."""
        buf = state["buf"] + data
        while True:
            if not state["started"]:
                if len(buf) < 4:
                    break
                n = int.from_bytes(buf[:4], "big")
                if len(buf) < n:
                    break
                code = int.from_bytes(buf[4:8], "big") if n >= 8 else 0
                buf = buf[n:]
                # SSLRequest / GSSENCRequest are followed by another untyped message.
                if code not in (80877103, 80877104):
                    state["started"] = True
                continue
            if len(buf) < 5:
                break
            n = int.from_bytes(buf[1:5], "big")
            if len(buf) < n + 1:
                break
            kind = chr(buf[0])
            self.messages[kind] = self.messages.get(kind, 0) + 1
            state["batch"].append(kind)
            buf = buf[n + 1 :]
        state["buf"] = buf


def sqlite_row_bytes(path: str | Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of a SQLite file (for bytes-written diffs)."""
    import sqlite3

    conn = sqlite3.connect(str(path))
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}
    finally:
        conn.close()


def _value_size(v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, (bytes, bytearray, memoryview)):
        return len(v)
    if isinstance(v, str):
        return len(v.encode("utf-8", "surrogatepass"))
    return 8  # INTEGER / REAL


def sqlite_bytes_written(
    before: dict[str, list[tuple[Any, ...]]], after: dict[str, list[tuple[Any, ...]]]
) -> int:
    """Bytes of the rows that are new or changed between two snapshots (sum of value sizes)."""
    from collections import Counter

    total = 0
    for table, rows in after.items():
        old = Counter(before.get(table, []))
        for row in rows:
            if old[row] > 0:
                old[row] -= 1
                continue
            total += sum(_value_size(v) for v in row)
    return total
