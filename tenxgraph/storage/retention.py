"""Erasing a user and expiring idle threads: the rules, the result types, the shared loop.

Two operations remove a set of threads from a store, every row of them and every cached copy:

* **erasure** (``checkpointer.aerase_user(user_id)``, ``tenxgraph users erase``): every thread
  a user owns, and every row the user holds elsewhere (stop requests, leases and submitted
  runs on thread ids that have no checkpoint, or that another user owns);
* **retention** (``thread_ttl_s``, ``checkpointer.asweep_threads()``, ``tenxgraph threads
  sweep``, the worker's retention loop): the threads idle longer than their time to live,
  except one that holds a live run lease or an open submitted run.

The user's guide is ``docs/how-to/erasure-retention.md``. What every tier does:

* the **source of truth** deletes, in one transaction, the rows of each table of
  :data:`ERASE_TABLES` (Postgres: one statement, ``_sql.ERASE_OWNER`` / ``_sql.SWEEP_IDLE``;
  SQLite: one ``BEGIN IMMEDIATE`` transaction; memory: one critical section) and answers the
  thread ids and the rows deleted per table (:class:`Removal`);
* the **layered store** then drops those threads from every cache tier (the LRU; Redis, where
  a short-lived marker refuses any late write-back of them, see
  :meth:`tenxgraph.storage.redis.RedisCache.erase`), after flushing its own background lane;
* the **facade** drops the threads' state-cache entries and its remembered versions, and
  records the counts as OpenTelemetry counters (never a user id).

Which threads of a candidate set belong to the owner is the same rule for every store
(:func:`victims`): the threads the owner owns, and the thread ids that have no thread at all
(rows left by a stop request, a lease or a submitted run before any checkpoint).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tenxgraph.core.exceptions import ConfigError

__all__ = [
    "ERASE_TABLES",
    "EraseResult",
    "Removal",
    "SweepResult",
    "check_thread_ttl",
    "victims",
]

#: The tables a removal deletes from, in the order the counts are reported. ``threads`` first:
#: its row is what every write of a thread needs (the compare-and-swap), so once it is gone no
#: concurrent checkpoint of the thread can commit.
ERASE_TABLES: tuple[str, ...] = (
    "threads",
    "checkpoints",
    "messages",
    "tool_executions",
    "stop_requests",
    "thread_leases",
    "lease_waiters",
    "runs",
)

#: Threads a retention pass deletes per transaction (one statement on Postgres).
SWEEP_BATCH = 500


class _Counts:
    """``threads`` and ``total_rows`` of a result with ``thread_ids`` and ``rows``."""

    __slots__ = ()
    thread_ids: tuple[str, ...]
    rows: Mapping[str, int]

    @property
    def threads(self) -> int:
        """Number of threads removed."""
        return len(self.thread_ids)

    @property
    def total_rows(self) -> int:
        """Rows deleted from the source of truth, all tables."""
        return sum(self.rows.values())


@dataclass(frozen=True, slots=True)
class Removal(_Counts):
    """What one removal deleted.

    Attributes:
        thread_ids: the removed thread ids, sorted, unique.
        rows: rows deleted from the source of truth per table (every name of
            :data:`ERASE_TABLES`, 0 when none).
        caches: entries removed per cache tier (``"lru"``, ``"redis"``, ``"state_cache"``:
            thread keys for the first two, state-cache entries for the last).
        pending: cache tiers that could not be reached: each removes the threads' keys as
            soon as it is reachable again from this process (they are never served meanwhile:
            every cached copy is confirmed by the source before use).
        owners: the owner scope of each thread of ``thread_ids`` (same order) when the
            removal found them (a sweep); empty for an erasure (the owner is known).
    """

    thread_ids: tuple[str, ...] = ()
    rows: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(ERASE_TABLES, 0))
    caches: Mapping[str, int] = field(default_factory=dict)
    pending: tuple[str, ...] = ()
    owners: tuple[str, ...] = ()

    def merged(self, other: Removal) -> Removal:
        """This removal followed by ``other`` (counts added, threads united)."""
        ids = dict.fromkeys(self.thread_ids, "")
        ids.update(zip(self.thread_ids, self.owners, strict=False))
        for i, tid in enumerate(other.thread_ids):
            ids[tid] = other.owners[i] if i < len(other.owners) else ids.get(tid, "")
        order = sorted(ids)
        owners = tuple(ids[t] for t in order) if (self.owners or other.owners) else ()
        return Removal(
            thread_ids=tuple(order),
            rows=_add(self.rows, other.rows),
            caches=_add(self.caches, other.caches),
            pending=tuple(sorted(set(self.pending) | set(other.pending))),
            owners=owners,
        )

    def with_caches(self, caches: Mapping[str, int], pending: Iterable[str]) -> Removal:
        """This removal with cache counts added and ``pending`` tiers noted."""
        return Removal(
            thread_ids=self.thread_ids,
            rows=self.rows,
            caches=_add(self.caches, caches),
            pending=tuple(sorted(set(self.pending) | set(pending))),
            owners=self.owners,
        )


@dataclass(frozen=True, slots=True)
class EraseResult(_Counts):
    """What ``aerase_user`` removed (see ``docs/how-to/erasure-retention.md``).

    Attributes:
        thread_ids: the erased thread ids, sorted (the user's threads, and thread ids of
            which only a stop request, lease or submitted run was left).
        rows: rows deleted from the source of truth per table (every table of
            :data:`ERASE_TABLES`; 0 when none).
        caches: entries removed per cache tier of this process and the shared cache:
            ``"lru"`` and ``"redis"`` (thread keys), ``"state_cache"`` (the user's
            ``aput_state_cache`` entries).
        pending: cache tiers that could not be reached (``"redis"`` during an outage): their
            keys of these threads are deleted by this process when the tier is back, and are
            never served meanwhile.
    """

    thread_ids: tuple[str, ...]
    rows: Mapping[str, int]
    caches: Mapping[str, int]
    pending: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every tier was reached (``pending`` is empty)."""
        return not self.pending


@dataclass(frozen=True, slots=True)
class SweepResult(_Counts):
    """What one retention sweep (``asweep_threads``) removed.

    Attributes:
        thread_ids: the expired thread ids, sorted.
        rows: rows deleted from the source of truth per table (every table of
            :data:`ERASE_TABLES`).
        caches: entries removed per cache tier (as :attr:`EraseResult.caches`).
        pending: cache tiers that could not be reached (as :attr:`EraseResult.pending`).
        batches: transactions the sweep took (:data:`SWEEP_BATCH` threads each at most).
    """

    thread_ids: tuple[str, ...]
    rows: Mapping[str, int]
    caches: Mapping[str, int]
    pending: tuple[str, ...] = ()
    batches: int = 0


def _add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def victims(candidates: Iterable[str], owners: Mapping[str, str], owner: str) -> list[str]:
    """The thread ids of ``candidates`` whose rows belong to ``owner``: those it owns and those
    with no thread at all (the rule of every store; Postgres applies it in ``ERASE_OWNER``).

    Args:
        candidates: thread ids the owner holds anything of, or named by the caller.
        owners: thread id -> owner of the candidates that have a thread.
        owner: the owner scope (``"*"`` when isolation is off).

    Returns:
        The ids, sorted, unique.
    """
    return sorted({t for t in candidates if owners.get(t, owner) == owner})


def row_counts(counts: Iterable[int]) -> dict[str, int]:
    """``{table: count}`` from counts in :data:`ERASE_TABLES` order."""
    return {t: int(n) for t, n in zip(ERASE_TABLES, counts, strict=True)}


def check_thread_ttl(
    value: Any, key: str = "thread_ttl_s", *, allow_none: bool = True
) -> float | None:
    """Validate a thread time to live.

    Args:
        value: seconds (``int`` or ``float`` > 0; ``math.inf``: never expires), or ``None``
            (no TTL: the checkpointer default / no override).
        key: the argument's name for the error.
        allow_none: whether ``None`` is accepted.

    Returns:
        The TTL as a float, or ``None``.

    Raises:
        ConfigError: ``CONFIG_001`` (``context["key"]``) for a bool, a non-number, NaN, zero or
            a negative number, or ``None`` when not allowed.
    """
    if value is None and allow_none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or value <= 0
    ):
        raise ConfigError(
            f"{key} must be a number of seconds > 0 (math.inf: never expires)"
            f"{' or None' if allow_none else ''}, not {value!r}",
            context={"key": key},
        )
    return float(value)
