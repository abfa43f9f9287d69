"""The small protocols every storage tier implements.

Two kinds of tier:

* a **source of truth** (:class:`StoreTier`: in-memory, SQLite, Postgres) owns versions, does the
  compare-and-swap, keeps history, the tool ledger and the stop flags;
* a **cache tier** (:class:`CacheTier`: in-process LRU, Redis) holds copies of the latest
  checkpoint of a thread and is never authoritative: a copy is validated against the source
  of truth (:meth:`StoreTier.read_since`) before a run relies on it.

:class:`tenxgraph.storage.layered.LayeredStore` stacks cache tiers over a source of truth and is
itself a :class:`StoreTier`, so the checkpointer facades see one interface. The records the tiers
exchange (:class:`~tenxgraph.records.ThreadKey`, :class:`~tenxgraph.records.StoredCheckpoint`,
:class:`~tenxgraph.records.CheckpointWrite`, ...) live in the neutral :mod:`tenxgraph.records`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from tenxgraph.records import (
    CheckpointWrite,
    LeaseGrant,
    LedgerEntry,
    Range,
    StoredCheckpoint,
    ThreadInfo,
    ThreadKey,
)

__all__ = [
    "CacheTier",
    "StoreTier",
    "report_skipped",
    "thread_info_from_row",
    "threads_from_rows",
]

_log = logging.getLogger("tenxgraph.storage")


def report_skipped(operation: str, errors: list[Any]) -> None:
    """Report, once per call of a list operation, the rows it skipped as undecodable: one
    warning (logger ``tenxgraph.storage``) and one ``tenxgraph.row.skipped`` event on the
    current span, naming the count and the first few ``(thread, version, path)`` (no values).

    Args:
        operation: the list operation (``"list_threads"``, ``"get_state_history"``).
        errors: the ``SerializationError`` s of the skipped rows (nothing is reported when
            empty).
    """
    if not errors:
        return
    from opentelemetry import trace

    from tenxgraph.telemetry import ATTR, EVENT

    where = [
        f"{e.context.get('thread_id')!r}@{e.context.get('version')}:{e.context.get('path')}"
        for e in errors[:5]
    ]
    _log.warning(
        "%s skipped %d stored row(s) that cannot be decoded (%s%s); the other rows are "
        "returned. Restore or delete the damaged rows",
        operation,
        len(errors),
        ", ".join(where),
        ", ..." if len(errors) > 5 else "",
    )
    sp = trace.get_current_span()
    if sp.is_recording():
        sp.add_event(
            EVENT.ROW_SKIPPED,
            {ATTR.DB_OPERATION: operation, ATTR.ROWS_SKIPPED: len(errors)},
        )


def thread_info_from_row(row: tuple[Any, ...]) -> ThreadInfo:
    """Build from a ``(thread_id, owner, version, status, created_at, updated_at,
    metadata_json_bytes)`` row, the column order every tier's thread listing uses.

    Raises:
        SerializationError: ``STORAGE_SERIALIZATION_000`` when the metadata is not a
            decodable JSON object (``context``: ``thread_id``, ``path`` ``"$.metadata"``).
    """
    from tenxgraph.core.exceptions import SerializationError
    from tenxgraph.storage import serde

    tid, owner, version, status, created, updated, meta = row
    data = serde.decode_payload(meta, thread_id=str(tid), what="metadata", path="$.metadata")
    if not isinstance(data, dict):
        raise SerializationError(
            f"the stored metadata of thread {tid!r} is a {type(data).__name__}, not a JSON "
            "object; the row is damaged",
            context={
                "thread_id": str(tid),
                "version": None,
                "path": "$.metadata",
                "type": type(data).__name__,
            },
        )
    return ThreadInfo(tid, owner, version, status, created, updated, data)


def threads_from_rows(rows: Iterable[tuple[Any, ...]]) -> list[ThreadInfo]:
    """``thread_info_from_row`` of each row, skipping (and reporting once, see
    ``report_skipped``) those whose stored data cannot be decoded, so one damaged row does
    not hide every other thread of its owner."""
    from tenxgraph.core.exceptions import SerializationError

    out: list[ThreadInfo] = []
    bad: list[SerializationError] = []
    for row in rows:
        try:
            out.append(thread_info_from_row(row))
        except SerializationError as exc:
            bad.append(exc)
    report_skipped("list_threads", bad)
    return out


@runtime_checkable
class StoreTier(Protocol):
    """A source of truth (or a :class:`~tenxgraph.storage.layered.LayeredStore` over one).

    Every method enforces the owner scope of ``key.user_id`` inside its query: a thread owned
    by another user reads as missing, and writes, deletes or ledger access raise
    ``StorageError`` (``STORAGE_FORBIDDEN_001``) without revealing the owner. Driver errors are
    translated to the error family (``TransientStorageError`` for retryable ones).
    """

    #: tier name used in telemetry: ``"memory"``, ``"sqlite"``, ``"postgresql"``, ``"layered"``.
    name: str

    async def asetup(self) -> None:
        """Create or migrate the schema; idempotent, safe from several processes at once."""
        ...

    async def aclose(self) -> None:
        """Release connections and pools; idempotent."""
        ...

    async def read(
        self, key: ThreadKey, version: int | None = None, *, with_messages: bool = True
    ) -> StoredCheckpoint | None:
        """The latest (or the given kept) version, or ``None`` when missing or not owned."""
        ...

    async def read_since(
        self, key: ThreadKey, known: StoredCheckpoint | None
    ) -> StoredCheckpoint | None:
        """The latest version, read against the cached copy ``known`` in one round trip:
        ``known`` itself when it is still the latest (same ``version`` and ``created_at``),
        else the latest version with complete ``messages`` (reusing ``known.messages`` when
        the thread only appended since; all of them when ``known`` is ``None``), or ``None``
        when missing or not owned."""

    async def current_version(self, key: ThreadKey) -> int | None:
        """The latest version number (cheap), or ``None`` when missing or not owned."""
        ...

    async def write(self, w: CheckpointWrite) -> StoredCheckpoint:
        """Compare-and-swap ``w`` in one round trip / one transaction.

        Returns the new record (``messages`` may be ``None``). Raises ``StaleStateError`` when
        the stored version is not ``w.expected_version`` (nothing of ``w`` is visible), or the
        forbidden ``StorageError`` when another user owns the thread.
        """
        ...

    async def history(
        self, key: ThreadKey, *, limit: int | None = None, before: int | None = None
    ) -> list[StoredCheckpoint]:
        """Kept versions, newest first, with messages, below ``before`` when given; a constant
        number of queries whatever the count."""
        ...

    async def delete_thread(self, key: ThreadKey) -> bool:
        """Delete every version, message, ledger row and flag of the thread; ``True`` if it
        existed. Forbidden for a non-owner."""
        ...

    async def list_threads(
        self, user_id: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ThreadInfo]:
        """Threads owned by ``user_id`` (``"*"``: all), most recently updated first."""
        ...

    async def set_thread_metadata(self, key: ThreadKey, metadata: dict[str, Any]) -> None:
        """Replace the application metadata of an existing thread (owner only)."""
        ...

    async def ledger_get(self, key: ThreadKey, call_key: str) -> LedgerEntry | None:
        """The recorded execution for ``call_key``, or ``None``."""
        ...

    async def ledger_put(self, key: ThreadKey, entry: LedgerEntry) -> LedgerEntry:
        """Record ``entry`` durably; if ``call_key`` is already recorded (a racing replay),
        keep the first and return it. Failures raise ``LedgerWriteError``."""
        ...

    async def ledger_count(self, key: ThreadKey) -> int:
        """Number of ledger rows of the thread (for verification and tests)."""
        ...

    async def set_stop(self, key: ThreadKey, requested: bool, at: float | None = None) -> None:
        """Record (``requested``) or withdraw the caller's durable stop request for a thread,
        made at ``at`` (UNIX seconds, default now); the newest request time is kept. Works
        before the thread's first checkpoint; any instance may call. Raises forbidden when
        another user owns the thread."""
        ...

    async def lease_acquire(
        self, key: ThreadKey, holder: str, *, ttl_s: float, lapse_s: float, queue: bool
    ) -> LeaseGrant:
        """One attempt to take the thread's run lease for ``holder`` (a run id): granted when
        nobody holds it (or the holder's lease lapsed) and no earlier live waiter is queued;
        ``queue`` registers (or keeps alive) the caller's place when refused. See
        :class:`tenxgraph.records.LeaseGrant`."""
        ...

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
        """The first read of a run that needs the lease: one acquisition attempt (as
        :meth:`lease_acquire`) and, only when granted, the thread's latest version read
        against ``known`` (as :meth:`read_since`; a layered store given ``None`` reads against
        the copy its caches hold), as one operation (Postgres: one statement). The record
        reflects every write committed before the grant. Returns ``(grant, record)``; the
        record is ``None`` when refused or when the thread does not exist."""
        ...

    async def lease_peek(self, key: ThreadKey, holder: str, *, lapse_s: float) -> LeaseGrant:
        """What an acquisition attempt would find, changing nothing and taking no lock (a
        waiting run's poll): ``expires_in_s`` ``0.0`` when free, ``ahead`` the live waiters
        queued before ``holder``."""
        ...

    async def lease_renew(self, key: ThreadKey, holder: str, fence: int, ttl_s: float) -> bool:
        """Extend the holder's lease by ``ttl_s`` seconds from now; ``False`` once another run
        took the lease."""
        ...

    async def lease_release(self, key: ThreadKey, holder: str, fence: int | None) -> None:
        """Give the lease of ``fence`` up and withdraw ``holder`` from the queue."""
        ...

    async def get_stop(self, key: ThreadKey, since: float | None = None) -> bool:
        """Whether the caller has a stop request for the thread, made at or after ``since``
        (UNIX seconds) when given; ``False`` when another user owns the thread."""
        ...

    async def kept_versions(self, key: ThreadKey) -> tuple[int, int] | None:
        """``(oldest kept, latest)`` version of the thread, or ``None`` when missing or not
        owned (time travel, :mod:`tenxgraph.storage._fork`)."""
        ...

    async def fork(
        self,
        src: ThreadKey,
        version: int,
        w: CheckpointWrite,
        copy: tuple[Range, ...],
        metadata: bytes,
    ) -> StoredCheckpoint:
        """Create thread ``w.thread_id`` (expected version 0) at version 1 from ``w`` in one
        atomic step: the rows of ``copy`` copied from kept version ``version`` of ``src``
        inside the store (same seqs, never decoded), ``w.new_messages`` added, ``src``'s
        ledger rows copied, ``metadata`` (encoded JSON object) as its thread metadata. Raises
        ``ResourceNotFoundError`` when the source version is not kept, ``StaleStateError``
        when the target exists, forbidden when another user owns the target."""
        ...


@runtime_checkable
class CacheTier(Protocol):
    """A cache of each thread's latest :class:`StoredCheckpoint`; never authoritative.

    A failing or garbage-holding cache is a miss (reported as a span event and a warning),
    never an error for the run.
    """

    #: tier name used in telemetry: ``"lru"`` or ``"redis"``.
    name: str

    async def get(self, key: ThreadKey) -> StoredCheckpoint | None:
        """The cached latest checkpoint of ``key`` (same owner scope only), or ``None``."""

    async def put(
        self,
        record: StoredCheckpoint,
        new_messages: list[tuple[int, bytes]] | None = None,
        base_created_at: float | None = None,
    ) -> None:
        """Cache ``record`` as the thread's latest (ignored if older than what is cached).

        Either ``record.messages`` is complete (a read filled the tier), or ``new_messages``
        holds only the rows this version added (a write-through after a CAS write): the tier
        then applies them on top of the version it holds, ``record.version - 1``, and drops the
        thread when it does not hold exactly that checkpoint: that version, created at
        ``base_created_at`` (a thread deleted and created anew reuses version numbers; see
        :attr:`CheckpointWrite.base_created_at <tenxgraph.records.CheckpointWrite>`).
        ``record.decoded`` may carry the
        in-process message objects (``(message_list, length)``); only the LRU keeps it.
        """

    async def invalidate(self, key: ThreadKey) -> None:
        """Drop every entry of the thread (any owner scope)."""

    async def aclose(self) -> None:
        """Release connections; idempotent."""
