"""The submitted-runs table every built-in store keeps (schema version 7), and its in-memory
rules.

:class:`RunStore` is the part of a source of truth that :mod:`tenxgraph.core._recovery` and
:mod:`tenxgraph.core.runs` use; :class:`~tenxgraph.storage.memory.MemoryStore`,
:class:`~tenxgraph.storage.sqlite.SqliteStore` and
:class:`~tenxgraph.storage.postgres.PostgresStore` implement it (a
:class:`~tenxgraph.storage.layered.LayeredStore` hands the calls to its source: caches never
hold runs). :class:`RunTable` is the memory store's table, the reference for the rules:

* a run is recorded ``pending`` with ``attempts == 0``; recording an id already recorded for the
  same owner keeps the stored row (an idempotent submit);
* a run can only be recorded by the owner of its thread: another user's thread, or a thread id
  for which another user already submitted a run, is forbidden (``STORAGE_FORBIDDEN_001``);
* every change is a compare-and-swap on ``(status, attempts)``: of two workers moving the same
  run from the same state, one wins.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

from tenxgraph.core.exceptions import forbidden
from tenxgraph.records import ThreadKey
from tenxgraph.run_records import OPEN_STATUSES, RunRecord

__all__ = ["RunStore", "RunTable"]


@runtime_checkable
class RunStore(Protocol):
    """The submitted runs of a source of truth (see the module docstring)."""

    async def run_insert(self, key: ThreadKey, record: RunRecord) -> RunRecord:
        """Record ``record`` (status ``pending``) for ``key``'s owner and wake the workers
        (Postgres: ``NOTIFY``); when its id is already recorded, the stored row is kept.

        Returns:
            The stored row (``record``, or the one recorded earlier under the same id).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread or
                submitted a run on it.
        """
        ...

    async def run_get(self, key: ThreadKey, run_id: str) -> RunRecord | None:
        """The run of ``key``'s owner, or ``None`` (missing, or another user's)."""
        ...

    async def run_list(
        self, user_id: str, *, status: str = "", thread_id: str = "", limit: int = 100
    ) -> list[RunRecord]:
        """Runs of ``user_id`` (``""``: every owner; no user id is empty), of one ``status`` and one ``thread_id``
        when given (``""``: any), newest first, at most ``limit``."""
        ...

    async def run_open(self, limit: int) -> list[RunRecord]:
        """Open runs (``pending``, ``running``) of every owner, oldest first, at most
        ``limit`` (a worker's sweep)."""
        ...

    async def run_update(
        self, record: RunRecord, *, expect_status: str, expect_attempts: int, notify: bool = False
    ) -> bool:
        """Store ``record``'s mutable fields (status, attempts, crashes, holder, worker,
        last_error, output, updated_at) if the run is still in ``expect_status`` with
        ``expect_attempts`` attempts (a compare-and-swap); ``notify`` wakes the workers
        (Postgres: ``NOTIFY``) when it moved.

        Returns:
            Whether it moved (``False``: another worker or a cancel moved it first).
        """
        ...


class RunTable:
    """The submitted runs of one :class:`~tenxgraph.storage.memory.MemoryStore` (called under
    the store's lock; see the module docstring)."""

    __slots__ = ("_runs",)

    def __init__(self) -> None:
        self._runs: dict[tuple[str, str], RunRecord] = {}

    def insert(self, key: ThreadKey, record: RunRecord, thread_owner: str | None) -> RunRecord:
        """Record ``record`` unless its id is known (then return the stored row).

        Args:
            key: thread and owner scope.
            record: the new run (status ``pending``).
            thread_owner: the owner of the thread's checkpoints, ``None`` when none exist.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` (see :meth:`RunStore.run_insert`).
        """
        foreign = thread_owner is not None and thread_owner != key.user_id
        foreign = foreign or any(
            tid == key.thread_id and r.owner != key.user_id for (tid, _), r in self._runs.items()
        )
        if foreign:
            raise forbidden(key.thread_id)
        return self._runs.setdefault((key.thread_id, record.run_id), record)

    def get(self, key: ThreadKey, run_id: str) -> RunRecord | None:
        """The run of ``key``'s owner, or ``None``."""
        r = self._runs.get((key.thread_id, run_id))
        return r if r is not None and r.owner == key.user_id else None

    def listing(self, user_id: str, status: str, thread_id: str, limit: int) -> list[RunRecord]:
        """See :meth:`RunStore.run_list`."""
        rows = [
            r
            for r in self._runs.values()
            if (not user_id or r.owner == user_id)
            and (not status or r.status == status)
            and (not thread_id or r.thread_id == thread_id)
        ]
        rows.sort(key=lambda r: r.created_at, reverse=True)
        return rows[: max(0, limit)]

    def open_runs(self, limit: int) -> list[RunRecord]:
        """See :meth:`RunStore.run_open`."""
        rows = [r for r in self._runs.values() if r.status in OPEN_STATUSES]
        rows.sort(key=lambda r: r.created_at)
        return rows[: max(0, limit)]

    def update(self, record: RunRecord, expect_status: str, expect_attempts: int) -> bool:
        """See :meth:`RunStore.run_update`."""
        k = (record.thread_id, record.run_id)
        cur = self._runs.get(k)
        if cur is None or cur.status != expect_status or cur.attempts != expect_attempts:
            return False
        self._runs[k] = dataclasses.replace(
            cur,
            status=record.status,
            attempts=record.attempts,
            crashes=record.crashes,
            holder=record.holder,
            worker=record.worker,
            last_error=record.last_error,
            output=record.output,
            updated_at=record.updated_at,
        )
        return True

    def payloads(
        self, column: str, after: tuple[str, int | str] | None, header: bytes | None
    ) -> list[tuple[str, str, int | str, bytes]]:
        """Key rotation's rows of one payload column (``"input"`` or ``"output"``; a run
        without output is none): ``(thread_id, owner, run_id, payload)`` after the
        ``(thread_id, run_id)`` cursor, in its order, only those whose payload does not start
        with ``header`` (every row when ``None``)."""
        out: list[tuple[str, str, int | str, bytes]] = []
        for (tid, rid), r in sorted(self._runs.items()):
            blob = r.input if column == "input" else r.output
            if blob is None or (after is not None and (tid, rid) <= (after[0], str(after[1]))):
                continue
            if header is None or not blob.startswith(header):
                out.append((tid, r.owner, rid, blob))
        return out

    def swap_payload(
        self, column: str, thread_id: str, run_id: str, old: bytes, new: bytes
    ) -> bool:
        """Replace a run's ``column`` payload by ``new`` while it still is ``old`` (key
        rotation); whether it did."""
        k = (thread_id, run_id)
        cur = self._runs.get(k)
        if cur is None or (cur.input if column == "input" else cur.output) != old:
            return False
        if column == "input":
            self._runs[k] = dataclasses.replace(cur, input=new)
        else:
            self._runs[k] = dataclasses.replace(cur, output=new)
        return True

    def threads_of(self, owner: str) -> set[str]:
        """Thread ids ``owner`` submitted runs on."""
        return {tid for (tid, _), r in self._runs.items() if r.owner == owner}

    def open_on(self, thread_id: str) -> bool:
        """Whether the thread has an open (pending or running) run."""
        return any(
            tid == thread_id and r.status in OPEN_STATUSES for (tid, _), r in self._runs.items()
        )

    def drop(self, thread_ids: list[str], owner: str | None) -> int:
        """Delete the runs of ``thread_ids`` (and, with ``owner``, every run of that owner);
        returns how many (erasure and retention)."""
        gone = set(thread_ids)
        doomed = [
            k
            for k, r in self._runs.items()
            if k[0] in gone or (owner is not None and r.owner == owner)
        ]
        for k in doomed:
            del self._runs[k]
        return len(doomed)
