"""``SqliteStore``: the embedded durable source of truth (stdlib ``sqlite3``).

Design:

* **One connection per store**, opened lazily, used by one worker thread at a time: every
  blocking call runs through ``anyio.to_thread.run_sync`` and holds the store's
  ``threading.Lock`` *inside the worker thread*, so the event loop never blocks and the store is
  safe from several tasks, event loops or OS threads at once.
* **WAL journal**: readers never block the writer, and each read runs in one read transaction,
  so it sees one committed snapshot (never a half-written version).
* **Writes are one ``BEGIN IMMEDIATE`` transaction**: the compare-and-swap on
  ``threads.version``, the checkpoint row, the new message rows and the pruning commit together
  or not at all. ``BEGIN IMMEDIATE`` takes the database's write lock up front (waiting up to
  ``busy_timeout_s``), so several OS processes writing the same file serialize cleanly; a lock
  still held after the timeout surfaces as ``TransientStorageError`` (retry).
* **Durability**: ``synchronous=NORMAL`` by default. In WAL mode that is safe against
  application crashes (a committed write survives the process being killed) and never corrupts
  the database, but a power loss or OS crash may lose the last transactions committed before
  it. ``synchronous="FULL"`` fsyncs the WAL at every commit and survives power loss too, at the
  cost of one fsync per checkpoint.
* **Schema**: versioned in ``schema_version`` (:data:`~tenxgraph.storage._sqlite_sql.MIGRATIONS`,
  version 3 adds ``tool_executions``, 4 ``stop_requests``). ``asetup()`` migrates under ``BEGIN IMMEDIATE`` (safe
  from several processes at once) and is run lazily by the first operation when not called.

Every SQL statement lives in :mod:`tenxgraph.storage._sqlite_sql`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

import anyio
import orjson

from tenxgraph.core.exceptions import (
    LedgerWriteError,
    SchemaVersionError,
    SerializationError,
    StorageError,
    TransientStorageError,
    fence_lost,
    forbidden,
    redact,
    stale,
)
from tenxgraph.records import (
    CheckpointWrite,
    LeaseGrant,
    LedgerEntry,
    Range,
    StoredCheckpoint,
    ThreadInfo,
    ThreadKey,
)
from tenxgraph.run_records import RunRecord
from tenxgraph.storage import _lease_sqlite, _rotate, serde
from tenxgraph.storage import _sqlite_sql as q
from tenxgraph.storage.base import report_skipped, threads_from_rows
from tenxgraph.storage.memory import ledger_missing_thread, min_seq_of, thread_missing
from tenxgraph.storage.retention import ERASE_TABLES, Removal, victims
from tenxgraph.telemetry import ATTR, SPAN, SpanKind, add_conflict_event, enabled, span

__all__ = ["SqliteStore"]

T = TypeVar("T")

_DB_SYSTEM = "sqlite"
_NO_UPPER_BOUND = 2**62
#: SQLite primary result codes that mean "another connection holds a lock": retryable.
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def _translate(exc: sqlite3.Error) -> StorageError:
    """Map a ``sqlite3`` error to the error family (busy/locked: retryable)."""
    code = getattr(exc, "sqlite_errorcode", None)
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    text = redact(exc)
    busy = isinstance(code, int) and (code & 0xFF) in (_SQLITE_BUSY, _SQLITE_LOCKED)
    if busy or "database is locked" in text or "database is busy" in text:
        return TransientStorageError(
            f"SQLite database is busy ({text}): another connection held its lock past the "
            "busy timeout; retry, or raise busy_timeout_s",
            context={"backend": _DB_SYSTEM, "sqlite_error": name},
        )
    return StorageError(
        f"SQLite error: {text}", context={"backend": _DB_SYSTEM, "sqlite_error": name}
    )


def _ranges_from_json(text: str) -> tuple[Range, ...]:
    return tuple((s, e) for s, e in orjson.loads(text))


def _checked_ranges(thread_id: str, row: tuple[Any, ...]) -> tuple[Range, ...]:
    """The ranges of a checkpoint row ``(version, values, ranges, next_seq, ...)``, validated:
    pairs of integers ``0 <= start <= end <= next_seq``.

    Raises:
        SerializationError: ``STORAGE_SERIALIZATION_000`` for a damaged row (``context``:
            ``thread_id``, ``version``, ``path`` ``"$.ranges"``).
    """
    version, _, text, next_seq = row[:4]
    try:
        ranges = _ranges_from_json(text)
        ok = type(next_seq) is int and all(
            type(a) is int and type(b) is int and 0 <= a <= b <= next_seq for a, b in ranges
        )
    except Exception:  # noqa: BLE001 - not JSON, not pairs: a damaged row
        ok = False
    if not ok or not isinstance(row[1], bytes | str):
        raise SerializationError(
            f"the stored checkpoint of thread {thread_id!r} version {version} is damaged "
            "(its message ranges or values are not what tenxgraph wrote); restore the row, "
            "delete the thread, or read another version",
            context={
                "thread_id": thread_id,
                "version": version,
                "path": "$.ranges",
                "type": "ranges",
            },
        )
    return ranges


def _ranges_to_json(ranges: tuple[Range, ...] | list[Range]) -> str:
    return orjson.dumps([[int(s), int(e)] for s, e in ranges]).decode()


def _union(ranges: list[Range]) -> list[Range]:
    """Sorted, disjoint cover of ``ranges`` (adjacent or overlapping ranges merged)."""
    out: list[list[int]] = []
    for s, e in sorted(r for r in ranges if r[1] > r[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _messages(thread_id: str, ranges: tuple[Range, ...], rows: dict[int, bytes]) -> list[bytes]:
    try:
        return [rows[seq] for s, e in ranges for seq in range(s, e)]
    except KeyError as exc:
        raise StorageError(
            f"thread {thread_id!r}: message row {exc.args[0]} of a kept version is missing "
            "(database damaged or edited by hand)",
            context={"thread_id": thread_id},
        ) from None


def _record(key: ThreadKey, row: tuple[Any, ...], messages: list[bytes] | None) -> StoredCheckpoint:
    version, values, ranges, next_seq, status, created_at = row
    return StoredCheckpoint(
        thread_id=key.thread_id,
        user_id=key.user_id,
        version=version,
        values=values.encode("utf-8", "surrogatepass")
        if isinstance(values, str)
        else bytes(values),
        ranges=ranges if isinstance(ranges, tuple) else _ranges_from_json(ranges),
        messages=messages,
        next_seq=next_seq,
        status=status,
        created_at=created_at,
    )


class SqliteStore:
    """SQLite source of truth: every :class:`~tenxgraph.storage.base.StoreTier` guarantee that
    applies to one machine, with several processes sharing one database file.

    Args:
        db_path: database file (``str`` or path-like). ``":memory:"`` (the default) keeps the
            data in this store's one connection: it is lost on ``aclose()``.
        busy_timeout_s: seconds a statement waits for another connection's lock before failing
            with ``TransientStorageError``.
        synchronous: ``"NORMAL"`` (default: survives application crashes; a power loss may lose
            the last commits) or ``"FULL"`` (fsync at every commit; survives power loss).

    Raises:
        ValueError: ``synchronous`` is neither ``"NORMAL"`` nor ``"FULL"``, or
            ``busy_timeout_s`` is negative.

    All methods may raise ``TransientStorageError`` (``STORAGE_TRANSIENT_001``, retryable: the
    database stayed locked past ``busy_timeout_s``) or ``StorageError`` (``STORAGE_000``, other
    driver failures), and ``SchemaVersionError`` (``STORAGE_SCHEMA_001``) when the file's schema
    is newer than this code.
    """

    #: tier name used in telemetry.
    name = "sqlite"

    def __init__(
        self,
        db_path: str | os.PathLike[str] = ":memory:",
        *,
        busy_timeout_s: float = 5.0,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    ) -> None:
        level = str(synchronous).upper()
        if level not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}")
        if busy_timeout_s < 0:
            raise ValueError(f"busy_timeout_s must be >= 0 seconds, not {busy_timeout_s!r}")
        self._path = os.fspath(db_path)
        self._busy_timeout_s = float(busy_timeout_s)
        self._synchronous = level
        self._guard = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._schema_ok = False
        # db.namespace: the file's name only (a full path could name a user's home directory).
        self._namespace = (
            self._path if self._path == ":memory:" else os.path.basename(self._path) or self._path
        )

    def __repr__(self) -> str:
        return f"SqliteStore({self._path!r}, synchronous={self._synchronous!r})"

    def _span_attrs(self, operation: str, thread_id: str | None = None) -> dict[str, Any] | None:
        """Initial attributes of a CLIENT span (OpenTelemetry database conventions; SQLite has
        no server, so no ``server.*``), or ``None`` when tracing is off."""
        if not enabled():
            return None
        attrs: dict[str, Any] = {
            ATTR.DB_SYSTEM: _DB_SYSTEM,
            ATTR.DB_NAMESPACE: self._namespace,
            ATTR.DB_OPERATION: operation,
            ATTR.TIER: self.name,
        }
        if thread_id is not None:
            attrs[ATTR.THREAD_ID] = thread_id
        return attrs

    # -- connection plumbing (worker-thread side) ------------------------------------------------
    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` on the store's connection in a worker thread."""
        return await anyio.to_thread.run_sync(self._call, fn, args)

    def _call(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        with self._guard:
            try:
                conn = self._connection()
                if not self._schema_ok:
                    self._migrate(conn)
                    self._schema_ok = True
                return fn(conn, *args)
            except sqlite3.Error as exc:
                raise _translate(exc) from exc

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if self._path != ":memory:" and not self._path.startswith("file:"):
            parent = os.path.dirname(os.path.abspath(self._path))
            os.makedirs(parent, exist_ok=True)  # 10xGraph creates missing parents too
        conn = sqlite3.connect(
            self._path,
            timeout=self._busy_timeout_s,
            isolation_level=None,  # we issue BEGIN / COMMIT ourselves
            check_same_thread=False,  # used by one worker thread at a time, under _guard
        )
        try:
            deadline = time.monotonic() + self._busy_timeout_s
            while True:  # switching to WAL needs a moment of exclusive access
                try:
                    conn.execute(q.PRAGMA_JOURNAL_WAL)
                    break
                except sqlite3.OperationalError as exc:
                    if not isinstance(_translate(exc), TransientStorageError):
                        raise
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.01)
            conn.execute(q.PRAGMA_SYNCHRONOUS.format(level=self._synchronous))
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        self._schema_ok = False
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection, begin: str) -> Iterator[None]:
        """``begin`` ... ``COMMIT``; on any exception ``ROLLBACK`` and re-raise. A connection
        whose rollback fails is dropped (the next call reconnects)."""
        conn.execute(begin)
        try:
            yield
            conn.execute(q.COMMIT)
        except BaseException:
            if conn.in_transaction:
                try:
                    conn.execute(q.ROLLBACK)
                except sqlite3.Error:
                    self._drop_connection()
            raise

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Bring the schema to :data:`q.LATEST_SCHEMA_VERSION`, one step per transaction."""
        found = 0
        if conn.execute(q.SCHEMA_VERSION_TABLE_EXISTS).fetchone() is not None:
            found = conn.execute(q.SCHEMA_VERSION).fetchone()[0]
        while found != q.LATEST_SCHEMA_VERSION:
            if found > q.LATEST_SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"the SQLite database {self._path!r} has schema version {found}, newer than "
                    f"this tenxgraph understands ({q.LATEST_SCHEMA_VERSION}); upgrade tenxgraph",
                    context={"found": found, "supported": q.LATEST_SCHEMA_VERSION},
                )
            with self._transaction(conn, q.BEGIN_WRITE):
                conn.execute(q.CREATE_SCHEMA_VERSION)
                found = conn.execute(q.SCHEMA_VERSION).fetchone()[0]  # another process may
                if found < q.LATEST_SCHEMA_VERSION:  # have migrated meanwhile
                    for stmt in q.MIGRATIONS[found]:
                        conn.execute(stmt)
                    found += 1
                    conn.execute(q.INSERT_SCHEMA_VERSION, (found, time.time()))

    # -- lifecycle -------------------------------------------------------------------------------
    async def asetup(self) -> None:
        """Open the database and create or migrate the schema.

        Idempotent and safe from several processes at once (each step runs under
        ``BEGIN IMMEDIATE``). Optional: the first operation runs it when it was not called.

        Raises:
            SchemaVersionError: ``STORAGE_SCHEMA_001`` when the database's schema is newer than
                this code (``context``: ``found``, ``supported``).
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the database stayed locked.
        """
        with span(SPAN.SETUP, SpanKind.CLIENT, self._span_attrs("CREATE")):
            self._schema_ok = False
            await self._run(lambda conn: None)

    async def aschema_status(self) -> tuple[int | None, int]:
        """The schema version found in the file and the one this code uses, without creating
        or migrating anything.

        Returns:
            ``(found, supported)``; ``found`` is ``None`` when the tables do not exist.

        Raises:
            StorageError: ``STORAGE_000`` when the file cannot be opened.
        """
        return await anyio.to_thread.run_sync(self._schema_status_sync)

    def _schema_status_sync(self) -> tuple[int | None, int]:
        with self._guard:
            try:
                conn = self._connection()
                if conn.execute(q.SCHEMA_VERSION_TABLE_EXISTS).fetchone() is None:
                    return None, q.LATEST_SCHEMA_VERSION
                found = int(conn.execute(q.SCHEMA_VERSION).fetchone()[0])
            except sqlite3.Error as exc:
                raise _translate(exc) from exc
            if found == q.LATEST_SCHEMA_VERSION:
                self._schema_ok = True  # later calls need not look again
            return found, q.LATEST_SCHEMA_VERSION

    async def aclose(self) -> None:
        """Close the connection (idempotent). A later call reopens it; with ``":memory:"`` the
        data is gone."""
        await anyio.to_thread.run_sync(self._close_sync)

    def _close_sync(self) -> None:
        with self._guard:
            self._drop_connection()

    # -- checkpoints -----------------------------------------------------------------------------
    async def read(
        self, key: ThreadKey, version: int | None = None, *, with_messages: bool = True
    ) -> StoredCheckpoint | None:
        """The latest version of ``key``'s thread, or the given kept version.

        Args:
            key: thread and owner scope.
            version: a kept version number, or ``None`` for the latest.
            with_messages: fill ``messages`` (list order, ``len == ranges_len(ranges)``); the
                version row and its message rows are read in one snapshot.

        Returns:
            The record, or ``None`` when the thread or version does not exist or another user
            owns the thread (exactly as if it did not exist).
        """
        attrs = self._span_attrs("SELECT", key.thread_id)
        with span(SPAN.CHECKPOINT_READ, SpanKind.CLIENT, attrs) as sp:
            rec = await self._run(self._read_sync, key, version, with_messages)
            sp.set_attribute(ATTR.HIT, rec is not None)
            if rec is not None and sp.is_recording():
                sp.set_attribute(ATTR.VERSION, rec.version)
                size = len(rec.values) + sum(len(m) for m in rec.messages or ())
                sp.set_attribute(ATTR.BYTES, size)
            return rec

    async def read_since(
        self, key: ThreadKey, known: StoredCheckpoint | None
    ) -> StoredCheckpoint | None:
        """The latest version of ``key``'s thread, read against the cached copy ``known``: the
        version row alone when ``known`` is still the latest (same ``version`` and
        ``created_at``: ``known`` itself is returned), else the full latest version (a local
        file: a second read costs no round trip).

        Returns:
            ``known``, the latest record with its messages, or ``None`` when the thread does
            not exist or another user owns it.
        """
        if known is None:
            return await self.read(key)
        meta = await self.read(key, with_messages=False)
        if meta is None:
            return None
        if meta.version == known.version and meta.created_at == known.created_at:
            return known
        return await self.read(key)

    def _read_sync(
        self, conn: sqlite3.Connection, key: ThreadKey, version: int | None, with_messages: bool
    ) -> StoredCheckpoint | None:
        params = (key.thread_id, key.user_id, version)
        if not with_messages:
            row = conn.execute(q.READ_CHECKPOINT, params).fetchone()
            if row is None:
                return None
            return _record(key, (*row[:2], _checked_ranges(key.thread_id, row), *row[3:]), None)
        with self._transaction(conn, q.BEGIN_READ):
            row = conn.execute(q.READ_CHECKPOINT, params).fetchone()
            if row is None:
                return None
            ranges = _checked_ranges(key.thread_id, row)
            rows = dict(
                conn.execute(q.MESSAGES_IN_RANGES, (_ranges_to_json(ranges), key.thread_id))
            )
        rec = _record(key, (*row[:2], ranges, *row[3:]), None)
        rec.messages = _messages(key.thread_id, ranges, rows)
        return rec

    async def current_version(self, key: ThreadKey) -> int | None:
        """The latest version number, or ``None`` when missing or owned by another user."""
        attrs = self._span_attrs("SELECT", key.thread_id)
        with span(SPAN.CURRENT_VERSION, SpanKind.CLIENT, attrs):
            return await self._run(self._current_version_sync, key)

    @staticmethod
    def _current_version_sync(conn: sqlite3.Connection, key: ThreadKey) -> int | None:
        row = conn.execute(q.SELECT_VERSION, (key.thread_id, key.user_id)).fetchone()
        return None if row is None else row[0]

    async def write(self, w: CheckpointWrite) -> StoredCheckpoint:
        """Compare-and-swap ``w`` as version ``w.expected_version + 1`` in one transaction.

        The transaction updates ``threads.version`` only where the owner and the expected
        version match (``expected_version == 0`` inserts the thread instead), inserts the
        checkpoint row and the ``k`` rows of ``w.new_messages``, and prunes versions older than
        the newest ``w.history_limit`` with the message rows no kept version reaches: the
        work is ``O(k)``, whatever the thread's length.

        Returns:
            The new record, ``messages=None``.

        Raises:
            StaleStateError: ``STORAGE_CONFLICT_000`` when the stored version is not
                ``w.expected_version`` (``current_version`` is ``None`` for a missing thread);
                nothing of ``w`` is stored.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread;
                ``STORAGE_000`` when a new row reuses a stored seq (a caller bug).
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the database stayed locked
                past ``busy_timeout_s``; nothing was written, retry.
        """
        # The compare-and-swap is an INSERT of the thread (version 1) or an UPDATE of its
        # version, followed by the inserts and the pruning in the same transaction.
        attrs = self._span_attrs("INSERT" if w.expected_version == 0 else "UPDATE", w.thread_id)
        if attrs is not None:
            attrs[ATTR.VERSION] = w.expected_version + 1
            attrs[ATTR.MESSAGES_WRITTEN] = len(w.new_messages)
            attrs[ATTR.BYTES] = len(w.values) + sum(len(data) for _, data in w.new_messages)
        with span(SPAN.CHECKPOINT_WRITE, SpanKind.CLIENT, attrs) as sp:
            try:
                await self._run(self._write_sync, w)
            except StorageError as exc:
                if exc.error_code == "STORAGE_CONFLICT_000":
                    add_conflict_event(
                        sp, w.thread_id, w.expected_version, exc.context.get("current_version")
                    )
                raise
        return w.to_record(None)

    def _write_sync(self, conn: sqlite3.Connection, w: CheckpointWrite) -> None:
        new_version = w.expected_version + 1
        with self._transaction(conn, q.BEGIN_WRITE):
            if w.expected_version == 0:
                cur = conn.execute(
                    q.INSERT_THREAD, (w.thread_id, w.user_id, w.status, w.created_at, w.created_at)
                )
            else:
                cur = conn.execute(
                    q.UPDATE_THREAD_CAS,
                    (
                        new_version,
                        w.status,
                        w.created_at,
                        w.thread_id,
                        w.user_id,
                        w.expected_version,
                    ),
                )
            if cur.rowcount != 1:
                row = conn.execute(q.THREAD_OWNER_VERSION, (w.thread_id,)).fetchone()
                if row is not None and row[0] != w.user_id:
                    raise forbidden(w.thread_id)
                raise stale(
                    w.thread_id, w.expected_version, None if row is None else row[1], w.fence
                )
            if w.fence is not None and not _lease_sqlite.fence_ok(conn, w.thread_id, w.fence):
                # Another run took the lease since this one did: refused like a lost CAS (the
                # transaction rolls back, so nothing of ``w`` is stored).
                raise fence_lost(w.thread_id, w.expected_version, w.fence)
            if w.release and w.fence is not None:
                _lease_sqlite.release_by_fence(conn, w.thread_id, w.fence)
            conn.execute(
                q.INSERT_CHECKPOINT,
                (
                    w.thread_id,
                    new_version,
                    bytes(w.values),
                    _ranges_to_json(w.ranges),
                    w.next_seq,
                    min_seq_of(w.ranges, w.next_seq),
                    w.status,
                    w.created_at,
                ),
            )
            try:
                if len(w.new_messages) == 1:
                    seq, data = w.new_messages[0]
                    conn.execute(q.INSERT_MESSAGE, (w.thread_id, seq, bytes(data)))
                elif w.new_messages:
                    conn.executemany(
                        q.INSERT_MESSAGE,
                        [(w.thread_id, seq, bytes(data)) for seq, data in w.new_messages],
                    )
            except sqlite3.IntegrityError:
                raise StorageError(
                    f"checkpoint write for thread {w.thread_id!r} reuses a stored message seq; "
                    "compute writes with tenxgraph.storage._diff from the latest read",
                    context={"thread_id": w.thread_id},
                ) from None
            limit = w.history_limit
            if limit and limit > 0 and new_version > limit:
                cur = conn.execute(q.PRUNE_CHECKPOINTS, (w.thread_id, new_version - limit))
                if cur.rowcount > 0:
                    conn.execute(q.PRUNE_MESSAGES, (w.thread_id, w.thread_id))

    async def history(
        self, key: ThreadKey, *, limit: int | None = None, before: int | None = None
    ) -> list[StoredCheckpoint]:
        """Kept versions, newest first, with messages, in two queries and one snapshot
        whatever the number of versions (one for the versions, one for every message row they
        reference).

        Args:
            key: thread and owner scope.
            limit: at most this many versions (``None``: all kept; ``<= 0``: none).
            before: only versions ``< before`` when given.

        Returns:
            Records newest first; ``[]`` when the thread is missing or owned by another user.
        """
        if limit is not None and limit <= 0:
            return []
        attrs = self._span_attrs("SELECT", key.thread_id)
        with span(SPAN.HISTORY, SpanKind.CLIENT, attrs):
            return await self._run(self._history_sync, key, limit, before)

    def _history_sync(
        self, conn: sqlite3.Connection, key: ThreadKey, limit: int | None, before: int | None
    ) -> list[StoredCheckpoint]:
        params = (
            key.thread_id,
            key.user_id,
            _NO_UPPER_BOUND if before is None else before,
            -1 if limit is None else limit,
        )
        with self._transaction(conn, q.BEGIN_READ):
            rows = conn.execute(q.HISTORY_CHECKPOINTS, params).fetchall()
            if not rows:
                return []
            parsed: list[tuple[Range, ...]] = []
            good: list[tuple[Any, ...]] = []
            bad: list[SerializationError] = []
            for r in rows:
                try:
                    parsed.append(_checked_ranges(key.thread_id, r))
                    good.append(r)
                except SerializationError as exc:  # one damaged version: left out, reported
                    bad.append(exc)
            report_skipped("get_state_history", bad)
            cover = _union([rg for ranges in parsed for rg in ranges])
            msgs = dict(conn.execute(q.MESSAGES_IN_RANGES, (_ranges_to_json(cover), key.thread_id)))
        return [
            _record(key, (*row[:2], ranges, *row[3:]), _messages(key.thread_id, ranges, msgs))
            for row, ranges in zip(good, parsed, strict=True)
        ]

    # -- threads ---------------------------------------------------------------------------------
    async def delete_thread(self, key: ThreadKey) -> bool:
        """Delete every version, message row, ledger row and flag of the thread (one
        transaction).

        Returns:
            ``True`` if the thread existed.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        attrs = self._span_attrs("DELETE", key.thread_id)
        with span(SPAN.THREAD_DELETE, SpanKind.CLIENT, attrs):
            return await self._run(self._delete_sync, key)

    def _delete_sync(self, conn: sqlite3.Connection, key: ThreadKey) -> bool:
        with self._transaction(conn, q.BEGIN_WRITE):
            if conn.execute(q.DELETE_THREAD, (key.thread_id, key.user_id)).rowcount != 1:
                self._raise_if_foreign(conn, key)
                return False
            for stmt in (
                q.DELETE_CHECKPOINTS, q.DELETE_MESSAGES, q.DELETE_LEDGER, q.DELETE_STOPS,
            ):  # fmt: skip
                conn.execute(stmt, (key.thread_id,))
            return True

    @staticmethod
    def _raise_if_foreign(conn: sqlite3.Connection, key: ThreadKey) -> bool:
        """Error path: raise forbidden when another user owns the thread; else return whether
        the thread exists."""
        row = conn.execute(q.THREAD_OWNER_VERSION, (key.thread_id,)).fetchone()
        if row is not None and row[0] != key.user_id:
            raise forbidden(key.thread_id)
        return row is not None

    async def list_threads(
        self, user_id: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ThreadInfo]:
        """Threads owned by ``user_id`` (``"*"``: every thread), most recently updated first
        (ties by ``thread_id``), paginated by ``offset`` and ``limit`` (counts)."""
        if limit is not None and limit <= 0:
            return []
        return await self._run(self._list_sync, user_id, limit, max(offset or 0, 0))

    @staticmethod
    def _list_sync(
        conn: sqlite3.Connection, user_id: str, limit: int | None, offset: int
    ) -> list[ThreadInfo]:
        page = (-1 if limit is None else limit, offset)
        if user_id == "*":
            rows = conn.execute(q.LIST_THREADS_ALL, page).fetchall()
        else:
            rows = conn.execute(q.LIST_THREADS_OWNER, (user_id, *page)).fetchall()
        return threads_from_rows(rows)

    async def set_thread_metadata(self, key: ThreadKey, metadata: dict[str, Any]) -> None:
        """Replace the application metadata of an existing thread.

        Args:
            key: thread and owner scope.
            metadata: JSON-compatible dict (the tagged types of :mod:`serde` are kept too).

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when the thread does not exist.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            SerializationError: ``STORAGE_SERIALIZATION_000`` for a value that cannot be stored.
        """
        data = serde.dumps(dict(metadata), "$.metadata").decode()
        await self._run(self._set_metadata_sync, key, data)

    def _set_metadata_sync(self, conn: sqlite3.Connection, key: ThreadKey, data: str) -> None:
        if conn.execute(q.SET_METADATA, (data, key.thread_id, key.user_id)).rowcount != 1:
            if not self._raise_if_foreign(conn, key):
                raise thread_missing(key.thread_id)

    # -- ledger ----------------------------------------------------------------------------------
    async def ledger_get(self, key: ThreadKey, call_key: str) -> LedgerEntry | None:
        """The recorded execution for ``call_key``, or ``None`` (also for a missing thread).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        attrs = self._span_attrs("SELECT", key.thread_id)
        with span(SPAN.LEDGER_READ, SpanKind.CLIENT, attrs):
            return await self._run(self._ledger_get_sync, key, call_key)

    @staticmethod
    def _ledger_get_sync(
        conn: sqlite3.Connection, key: ThreadKey, call_key: str
    ) -> LedgerEntry | None:
        row = conn.execute(q.LEDGER_GET, (key.thread_id, call_key, key.user_id)).fetchone()
        if row is None:
            return None
        if not row[0]:
            raise forbidden(key.thread_id)
        if row[1] is None:
            return None
        return LedgerEntry(call_key, row[1], row[2], bytes(row[3]), row[4])

    async def ledger_put(self, key: ThreadKey, entry: LedgerEntry) -> LedgerEntry:
        """Record ``entry`` unless ``entry.call_key`` is recorded already; return the winner.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            LedgerWriteError: ``STORAGE_LEDGER_001`` when the thread does not exist or the row
                could not be written (``context``: ``thread_id``, ``tool_call_id``, ``tool``).
        """
        attrs = self._span_attrs("INSERT", key.thread_id)
        with span(SPAN.LEDGER_WRITE, SpanKind.CLIENT, attrs):
            try:
                return await self._run(self._ledger_put_sync, key, entry)
            except LedgerWriteError:
                raise
            except StorageError as exc:
                if exc.error_code == "STORAGE_FORBIDDEN_001":
                    raise
                raise LedgerWriteError(
                    f"could not record tool call {entry.tool_call_id!r} ({entry.tool_name}) of "
                    f"thread {key.thread_id!r}: {exc.message}",
                    context={
                        "thread_id": key.thread_id,
                        "tool_call_id": entry.tool_call_id,
                        "tool": entry.tool_name,
                    },
                ) from exc

    def _ledger_put_sync(
        self, conn: sqlite3.Connection, key: ThreadKey, entry: LedgerEntry
    ) -> LedgerEntry:
        with self._transaction(conn, q.BEGIN_WRITE):
            conn.execute(
                q.INSERT_LEDGER,
                (
                    key.thread_id,
                    entry.call_key,
                    entry.tool_call_id,
                    entry.tool_name,
                    bytes(entry.result),
                    entry.created_at,
                    key.user_id,
                ),
            )
            row = conn.execute(
                q.LEDGER_READ_BACK, (key.thread_id, entry.call_key, key.user_id)
            ).fetchone()
            if row is None:
                self._raise_if_foreign(conn, key)
                raise ledger_missing_thread(key, entry)
        return LedgerEntry(entry.call_key, row[0], row[1], bytes(row[2]), row[3])

    async def ledger_count(self, key: ThreadKey) -> int:
        """Number of ledger rows of the thread (0 when missing).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        return await self._run(self._ledger_count_sync, key)

    @staticmethod
    def _ledger_count_sync(conn: sqlite3.Connection, key: ThreadKey) -> int:
        row = conn.execute(q.LEDGER_COUNT, (key.thread_id, key.user_id)).fetchone()
        if row is None:
            return 0
        if not row[0]:
            raise forbidden(key.thread_id)
        return int(row[1])

    # -- run leases ------------------------------------------------------------------------------
    async def lease_acquire(
        self, key: ThreadKey, holder: str, *, ttl_s: float, lapse_s: float, queue: bool
    ) -> LeaseGrant:
        """One attempt to take the thread's run lease (see ``StoreTier.lease_acquire``), in
        one ``BEGIN IMMEDIATE`` transaction.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the file stayed locked.
        """
        return await self._run(self._lease_acquire_sync, key, holder, ttl_s, lapse_s, queue)

    def _lease_acquire_sync(
        self,
        conn: sqlite3.Connection,
        key: ThreadKey,
        holder: str,
        ttl_s: float,
        lapse_s: float,
        queue: bool,
    ) -> LeaseGrant:
        with self._transaction(conn, q.BEGIN_WRITE):
            row = conn.execute(q.THREAD_OWNER_VERSION, (key.thread_id,)).fetchone()
            if row is not None and row[0] != key.user_id:
                raise forbidden(key.thread_id)
            grant = _lease_sqlite.acquire(
                conn,
                key.thread_id,
                key.user_id,
                holder,
                now=time.time(),
                ttl_s=ttl_s,
                lapse_s=lapse_s,
                queue=queue,
                thread_exists=row is not None,
            )
        if grant is None:
            raise forbidden(key.thread_id)
        return grant

    async def lease_read(
        self,
        key: ThreadKey,
        known: StoredCheckpoint | None,
        holder: str,
        *,
        ttl_s: float,
        lapse_s: float,
        queue: bool,
    ) -> tuple[LeaseGrant, StoredCheckpoint | None]:
        """One attempt to take the thread's run lease and, when granted, the thread's latest
        version (``known`` itself when it is still current; see ``StoreTier.lease_read``):
        one ``BEGIN IMMEDIATE`` transaction, so the read sees every write committed before
        the grant.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the file stayed locked.
        """
        attrs = self._span_attrs("SELECT", key.thread_id)
        with span(SPAN.CHECKPOINT_READ, SpanKind.CLIENT, attrs) as sp:
            grant, rec = await self._run(
                self._lease_read_sync, key, known, holder, ttl_s, lapse_s, queue
            )
            sp.set_attribute(ATTR.HIT, rec is not None)
            if rec is not None and sp.is_recording():
                sp.set_attribute(ATTR.VERSION, rec.version)
        return grant, rec

    def _lease_read_sync(
        self,
        conn: sqlite3.Connection,
        key: ThreadKey,
        known: StoredCheckpoint | None,
        holder: str,
        ttl_s: float,
        lapse_s: float,
        queue: bool,
    ) -> tuple[LeaseGrant, StoredCheckpoint | None]:
        with self._transaction(conn, q.BEGIN_WRITE):
            row = conn.execute(q.THREAD_OWNER_VERSION, (key.thread_id,)).fetchone()
            if row is not None and row[0] != key.user_id:
                raise forbidden(key.thread_id)
            grant = _lease_sqlite.acquire(
                conn,
                key.thread_id,
                key.user_id,
                holder,
                now=time.time(),
                ttl_s=ttl_s,
                lapse_s=lapse_s,
                queue=queue,
                thread_exists=row is not None,
            )
            if grant is None:
                raise forbidden(key.thread_id)
            if grant.fence is None or row is None:
                return grant, None
            head = conn.execute(q.READ_CHECKPOINT, (key.thread_id, key.user_id, None)).fetchone()
            if head is None:
                return grant, None
            ranges = _checked_ranges(key.thread_id, head)
            if (
                known is not None
                and head[0] == known.version
                and head[5] == known.created_at
                and known.messages is not None
            ):
                return grant, known
            rows = dict(
                conn.execute(q.MESSAGES_IN_RANGES, (_ranges_to_json(ranges), key.thread_id))
            )
        rec = _record(key, (*head[:2], ranges, *head[3:]), None)
        rec.messages = _messages(key.thread_id, ranges, rows)
        return grant, rec

    async def lease_peek(self, key: ThreadKey, holder: str, *, lapse_s: float) -> LeaseGrant:
        """What an acquisition attempt would find, in a read transaction (no write lock)."""
        return await self._run(self._lease_peek_sync, key, holder, lapse_s)

    def _lease_peek_sync(
        self, conn: sqlite3.Connection, key: ThreadKey, holder: str, lapse_s: float
    ) -> LeaseGrant:
        with self._transaction(conn, q.BEGIN_READ):
            return _lease_sqlite.peek(conn, key.thread_id, holder, now=time.time(), lapse_s=lapse_s)

    async def lease_renew(self, key: ThreadKey, holder: str, fence: int, ttl_s: float) -> bool:
        """Extend the holder's lease by ``ttl_s`` seconds from now; ``False`` once lost."""
        return await self._run(self._lease_renew_sync, key, holder, fence, ttl_s)

    def _lease_renew_sync(
        self, conn: sqlite3.Connection, key: ThreadKey, holder: str, fence: int, ttl_s: float
    ) -> bool:
        with self._transaction(conn, q.BEGIN_WRITE):
            return _lease_sqlite.renew(
                conn, key.thread_id, holder, fence, now=time.time(), ttl_s=ttl_s
            )

    async def lease_release(self, key: ThreadKey, holder: str, fence: int | None) -> None:
        """Give the lease of ``fence`` up and withdraw ``holder`` from the queue."""
        await self._run(self._lease_release_sync, key, holder, fence)

    def _lease_release_sync(
        self, conn: sqlite3.Connection, key: ThreadKey, holder: str, fence: int | None
    ) -> None:
        with self._transaction(conn, q.BEGIN_WRITE):
            _lease_sqlite.release(conn, key.thread_id, holder, fence)

    # -- stop flags ------------------------------------------------------------------------------
    async def set_stop(self, key: ThreadKey, requested: bool, at: float | None = None) -> None:
        """Record (``requested``) or withdraw the caller's stop request for the thread.

        A request is kept with its time, ``at`` (UNIX seconds, default now; the newest of
        several wins), also for a thread without a checkpoint yet, so the first node of a
        thread's first run can be stopped from another process.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        when = float(time.time() if at is None else at)
        await self._run(self._set_stop_sync, key, bool(requested), when)

    def _set_stop_sync(
        self, conn: sqlite3.Connection, key: ThreadKey, requested: bool, when: float
    ) -> None:
        if requested:
            if conn.execute(q.SET_STOP, (key.thread_id, key.user_id, when)).rowcount != 1:
                self._raise_if_foreign(conn, key)
        else:
            self._raise_if_foreign(conn, key)
            conn.execute(q.CLEAR_STOP, (key.thread_id, key.user_id))

    async def get_stop(self, key: ThreadKey, since: float | None = None) -> bool:
        """Whether the caller has a stop request for the thread, made at or after ``since``
        (UNIX seconds) when given (``False`` when another user owns the thread)."""
        requested_at = await self._run(self._get_stop_sync, key)
        return requested_at is not None and (since is None or requested_at >= since)

    @staticmethod
    def _get_stop_sync(conn: sqlite3.Connection, key: ThreadKey) -> float | None:
        row = conn.execute(q.SELECT_STOP, (key.thread_id, key.user_id)).fetchone()
        return None if row is None else float(row[0])

    # -- submitted runs (tenxgraph.storage.runs.RunStore) ---------------------------------------
    async def run_insert(self, key: ThreadKey, record: RunRecord) -> RunRecord:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_insert` (the workers' sweep finds
        it: SQLite has no notifications)."""
        return await self._run(self._run_insert_sync, key, record)

    def _run_insert_sync(self, conn: sqlite3.Connection, key: ThreadKey, r: RunRecord) -> RunRecord:
        with self._transaction(conn, q.BEGIN_WRITE):
            if conn.execute(q.RUN_FOREIGN, (key.thread_id, key.user_id)).fetchone() is not None:
                raise forbidden(key.thread_id)
            conn.execute(
                q.RUN_INSERT,
                (r.thread_id, r.run_id, r.owner, r.input, r.config, r.created_at, r.updated_at),
            )
            row = conn.execute(q.RUN_GET, (r.thread_id, r.run_id, key.user_id)).fetchone()
        return RunRecord.from_row(row)

    async def run_get(self, key: ThreadKey, run_id: str) -> RunRecord | None:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_get`."""
        rows = await self._run(self._run_rows_sync, q.RUN_GET, (key.thread_id, run_id, key.user_id))
        return rows[0] if rows else None

    async def run_list(
        self, user_id: str, *, status: str = "", thread_id: str = "", limit: int = 100
    ) -> list[RunRecord]:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_list`."""
        return await self._run(self._run_rows_sync, q.RUN_LIST, (user_id, status, thread_id, limit))

    async def run_open(self, limit: int) -> list[RunRecord]:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_open`."""
        return await self._run(self._run_rows_sync, q.RUN_OPEN, (limit,))

    def _run_rows_sync(
        self, conn: sqlite3.Connection, query: str, params: tuple[Any, ...]
    ) -> list[RunRecord]:
        with self._transaction(conn, q.BEGIN_READ):
            return [RunRecord.from_row(row) for row in conn.execute(query, params).fetchall()]

    async def run_update(
        self, record: RunRecord, *, expect_status: str, expect_attempts: int, notify: bool = False
    ) -> bool:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_update` (``notify``: SQLite has no
        notifications; the workers' sweep finds the run)."""
        return await self._run(self._run_update_sync, record, expect_status, expect_attempts)

    def _run_update_sync(
        self, conn: sqlite3.Connection, r: RunRecord, expect_status: str, expect_attempts: int
    ) -> bool:
        with self._transaction(conn, q.BEGIN_WRITE):
            cur = conn.execute(
                q.RUN_UPDATE,
                (
                    r.status,
                    r.attempts,
                    r.crashes,
                    r.holder,
                    r.worker,
                    r.last_error,
                    r.output,
                    r.updated_at,
                    r.thread_id,
                    r.run_id,
                    expect_status,
                    expect_attempts,
                ),
            )
            return cur.rowcount == 1

    # -- erasure and retention (tenxgraph.storage.retention) ------------------------------------
    async def erase_owner(
        self, owner: str, *, by_owner: bool, thread_ids: list[str] | tuple[str, ...] = ()
    ) -> Removal:
        """Delete every row of ``owner``'s threads (with ``by_owner``: every thread it owns and
        every stop request, lease and run it holds elsewhere; plus ``thread_ids``) in one
        ``BEGIN IMMEDIATE`` transaction (see :mod:`tenxgraph.storage.retention`).

        Returns:
            The removed thread ids and the rows deleted per table.
        """
        attrs = self._span_attrs("DELETE")
        with span(SPAN.ERASE, SpanKind.CLIENT, attrs):
            return await self._run(self._erase_sync, owner, by_owner, list(thread_ids))

    def _erase_sync(
        self, conn: sqlite3.Connection, owner: str, by_owner: bool, thread_ids: list[str]
    ) -> Removal:
        with self._transaction(conn, q.BEGIN_WRITE):
            cand = set(thread_ids)
            if by_owner:
                cand.update(r[0] for r in conn.execute(q.ERASE_CANDIDATES, (owner,) * 4))
            listed = orjson.dumps(sorted(cand)).decode()
            owners = dict(conn.execute(q.THREAD_OWNERS, (listed,)).fetchall())
            ids = victims(cand, owners, owner)
            return Removal(
                thread_ids=tuple(ids),
                rows=self._delete_rows(conn, ids, owner if by_owner else None),
            )

    @staticmethod
    def _delete_rows(conn: sqlite3.Connection, ids: list[str], owner: str | None) -> dict[str, int]:
        """Delete every row of ``ids`` (and, with ``owner``, the rows it holds on other
        thread ids); the rows deleted per table. Inside the caller's transaction."""
        listed = orjson.dumps(ids).decode()
        rows = {t: conn.execute(q.ERASE_BY_THREAD[t], (listed,)).rowcount for t in ERASE_TABLES}
        if owner is not None:
            for table, stmt in q.ERASE_BY_OWNER.items():
                rows[table] += conn.execute(stmt, (owner,)).rowcount
        return rows

    async def sweep_idle(self, now: float, default_ttl_s: float | None, limit: int) -> Removal:
        """Delete up to ``limit`` threads idle longer than their TTL at ``now`` (UNIX
        seconds), oldest first, except those holding a live run lease or an open submitted
        run, with every row of them, in one transaction (see ``MemoryStore.sweep_idle``).

        Returns:
            The removed thread ids with their owners, and the rows deleted per table.
        """
        default = float("inf") if default_ttl_s is None else default_ttl_s
        with span(SPAN.SWEEP, SpanKind.CLIENT, self._span_attrs("DELETE")):
            return await self._run(self._sweep_sync, now, default, limit)

    def _sweep_sync(
        self, conn: sqlite3.Connection, now: float, default: float, limit: int
    ) -> Removal:
        with self._transaction(conn, q.BEGIN_WRITE):
            found = conn.execute(q.SWEEP_CANDIDATES, (now, default, time.time(), limit)).fetchall()
            pairs = sorted((str(t), str(o)) for t, o in found)
            ids = [t for t, _ in pairs]
            rows = self._delete_rows(conn, ids, None)
        return Removal(thread_ids=tuple(ids), rows=rows, owners=tuple(o for _, o in pairs))

    async def set_thread_ttl(self, key: ThreadKey, ttl_s: float | None) -> None:
        """Set (``None``: clear) the thread's own retention override, in seconds.

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when the thread does not exist.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """

        def put(conn: sqlite3.Connection) -> None:
            with self._transaction(conn, q.BEGIN_WRITE):
                done = conn.execute(q.SET_THREAD_TTL, (ttl_s, key.thread_id, key.user_id))
                if done.rowcount != 1 and not self._raise_if_foreign(conn, key):
                    raise thread_missing(key.thread_id)

        await self._run(put)

    async def get_thread_ttl(self, key: ThreadKey) -> tuple[bool, float | None]:
        """``(exists, override)``: whether the caller's thread exists, and its own retention
        override in seconds (``None``: none)."""

        def get(conn: sqlite3.Connection) -> tuple[bool, float | None]:
            row = conn.execute(q.GET_THREAD_TTL, (key.thread_id, key.user_id)).fetchone()
            return (False, None) if row is None else (True, row[0])

        return await self._run(get)

    # -- generic cache values (10xGraph's cache methods; never read by a run) --------------------
    async def kv_put(self, namespace: str, key: str, value: bytes, ttl_s: float | None) -> None:
        """Store a cache value in the file (see ``tenxgraph.storage.kv.CacheValueStore``);
        expired entries are purged on the way."""
        now = time.time()
        expires = None if ttl_s is None else now + ttl_s
        await self._run(self._kv_put_sync, namespace, key, value, expires, now)

    def _kv_put_sync(
        self,
        conn: sqlite3.Connection,
        ns: str,
        key: str,
        value: bytes,
        expires: float | None,
        now: float,
    ) -> None:
        with self._transaction(conn, q.BEGIN_WRITE):
            conn.execute(q.KV_PURGE_EXPIRED, (now,))
            conn.execute(q.KV_PUT, (ns, key, value, expires))

    async def kv_get(self, namespace: str, key: str) -> bytes | None:
        """The live cache value of ``(namespace, key)``, or ``None``."""

        def get(conn: sqlite3.Connection) -> bytes | None:
            row = conn.execute(q.KV_GET, (namespace, key, time.time())).fetchone()
            return None if row is None else bytes(row[0])

        return await self._run(get)

    async def kv_delete(self, namespace: str, key: str) -> bool:
        """Remove ``(namespace, key)``; ``True`` when a live value was there."""

        def delete(conn: sqlite3.Connection) -> bool:
            now = time.time()
            with self._transaction(conn, q.BEGIN_WRITE):
                row = conn.execute(q.KV_DELETE, (namespace, key)).fetchone()
            return row is not None and (row[0] is None or row[0] > now)

        return await self._run(delete)

    async def kv_keys(self, namespace: str, prefix: str | None) -> list[str]:
        """Live keys of ``namespace`` starting with ``prefix``, sorted."""
        p = prefix or ""

        def keys(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(q.KV_KEYS, (namespace, len(p), p, time.time())).fetchall()
            return [r[0] for r in rows]

        return await self._run(keys)

    # -- key rotation (tenxgraph.storage._rotate) ------------------------------------------------
    async def rotate_page(
        self,
        table: str,
        after: tuple[str, int | str] | None,
        limit: int,
        header: bytes | None,
        older_than: float,
    ) -> list[tuple[str, str, int | str, bytes]]:
        """See :meth:`tenxgraph.storage._rotate.RotatableStore.rotate_page` (one query)."""
        if after is None:
            after = ("", _rotate.START[table])
        sql = {
            "checkpoints": q.ROTATE_SCAN_CHECKPOINTS,
            "messages": q.ROTATE_SCAN_MESSAGES,
            "tool_executions": q.ROTATE_SCAN_LEDGER,
            "runs.input": q.ROTATE_SCAN_RUN_INPUTS,
            "runs.output": q.ROTATE_SCAN_RUN_OUTPUTS,
        }[table]
        args: tuple[Any, ...] = (after[0], after[1], header is None, len(header or b""))
        args += (header or b"", limit)
        if table == "checkpoints":
            args += (older_than,)

        def page(conn: sqlite3.Connection) -> list[tuple[str, str, int | str, bytes]]:
            rows = conn.execute(sql, args).fetchall()
            return [(r[0], r[1], r[2], bytes(r[3])) for r in rows]

        return await self._run(page)

    async def rotate_swap(self, table: str, rows: list[tuple[str, int | str, bytes, bytes]]) -> int:
        """See :meth:`tenxgraph.storage._rotate.RotatableStore.rotate_swap`: one short write
        transaction per batch."""
        if not rows:
            return 0
        sql = {
            "checkpoints": q.ROTATE_SWAP_CHECKPOINTS,
            "messages": q.ROTATE_SWAP_MESSAGES,
            "tool_executions": q.ROTATE_SWAP_LEDGER,
            "runs.input": q.ROTATE_SWAP_RUN_INPUTS,
            "runs.output": q.ROTATE_SWAP_RUN_OUTPUTS,
        }[table]

        def swap(conn: sqlite3.Connection) -> int:
            done = 0
            with self._transaction(conn, q.BEGIN_WRITE):
                for tid, pos, old, new in rows:
                    done += conn.execute(sql, (new, tid, pos, old)).rowcount
            return done

        return await self._run(swap)

    # -- time travel (tenxgraph.storage._fork) ---------------------------------------------------
    async def kept_versions(self, key: ThreadKey) -> tuple[int, int] | None:
        """``(oldest kept, latest)`` version of the thread, or ``None`` when missing or owned
        by another user."""

        def kept(conn: sqlite3.Connection) -> tuple[int, int] | None:
            row = conn.execute(q.KEPT_VERSIONS, (key.thread_id, key.user_id)).fetchone()
            return None if row is None or row[0] is None else (int(row[0]), int(row[1]))

        return await self._run(kept)

    async def fork(
        self,
        src: ThreadKey,
        version: int,
        w: CheckpointWrite,
        copy: tuple[Range, ...],
        metadata: bytes,
    ) -> StoredCheckpoint:
        """Create thread ``w.thread_id`` at version 1 from ``w`` in one transaction: the message
        rows of ``copy`` (seq ranges of version ``version`` of ``src``) copied by one
        ``INSERT ... SELECT``, ``w.new_messages`` inserted, ``src``'s ledger rows copied by
        another, ``metadata`` (encoded JSON object) as the thread's metadata.

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when ``src`` (for its owner) or
                its version ``version`` is not kept (``context["oldest_kept"]``).
            StaleStateError: ``STORAGE_CONFLICT_000`` when thread ``w.thread_id`` exists.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns ``w.thread_id``.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the database stayed locked.
        """
        attrs = self._span_attrs("INSERT", w.thread_id)
        if attrs is not None:
            attrs[ATTR.VERSION] = 1
            attrs[ATTR.MESSAGES_WRITTEN] = len(w.new_messages)
        with span(SPAN.CHECKPOINT_WRITE, SpanKind.CLIENT, attrs):
            await self._run(self._fork_sync, src, version, w, copy, bytes(metadata).decode())
        return w.to_record(None)

    def _fork_sync(
        self,
        conn: sqlite3.Connection,
        src: ThreadKey,
        version: int,
        w: CheckpointWrite,
        copy: tuple[Range, ...],
        metadata: str,
    ) -> None:
        from tenxgraph.storage._fork import target_exists, version_missing

        with self._transaction(conn, q.BEGIN_WRITE):
            if (
                conn.execute(q.VERSION_KEPT, (src.thread_id, src.user_id, version)).fetchone()
                is None
            ):
                row = conn.execute(q.KEPT_VERSIONS, (src.thread_id, src.user_id)).fetchone()
                raise version_missing(src.thread_id, version, row[0], row[1])
            created = conn.execute(
                q.FORK_THREAD,
                (w.thread_id, w.user_id, w.status, w.created_at, w.created_at, metadata),
            )
            if created.rowcount != 1:
                row = conn.execute(q.THREAD_OWNER_VERSION, (w.thread_id,)).fetchone()
                if row is not None and row[0] != w.user_id:
                    raise forbidden(w.thread_id)
                raise target_exists(w.thread_id, None if row is None else row[1])
            conn.execute(
                q.INSERT_CHECKPOINT,
                (
                    w.thread_id,
                    1,
                    bytes(w.values),
                    _ranges_to_json(w.ranges),
                    w.next_seq,
                    min_seq_of(w.ranges, w.next_seq),
                    w.status,
                    w.created_at,
                ),
            )
            if copy:
                conn.execute(
                    q.FORK_COPY_MESSAGES, (w.thread_id, _ranges_to_json(copy), src.thread_id)
                )
            if w.new_messages:
                conn.executemany(
                    q.INSERT_MESSAGE,
                    [(w.thread_id, seq, bytes(data)) for seq, data in w.new_messages],
                )
            conn.execute(q.FORK_COPY_LEDGER, (w.thread_id, src.thread_id))
