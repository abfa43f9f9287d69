"""Time travel on the storage side: the pure pieces of rewinding and forking a thread (no I/O).

A **rewind** of a thread to its kept version ``N`` is an ordinary compare-and-swap write of a
new head whose message list is version ``N``'s ranges: no message row is written, because the
rows ``N`` references exist as long as ``N`` is kept (pruning only drops rows below the
smallest seq every kept version references). A **fork** creates another thread whose version 1
is version ``N`` of the source: the message rows of ``N`` are copied inside the store by one
statement (``INSERT ... SELECT`` on Postgres and SQLite), never decoded or re-encoded here,
under the same seqs, so the fork's ranges are ``N``'s ranges.

Both record where they came from inside the new version's ``values`` under :data:`ORIGIN_KEY`
(never decoded as a state field: stored keys a state class does not declare are dropped), so
``get_state_history`` can show it; a fork also records ``forked_from`` in its thread metadata.
"""

from __future__ import annotations

from typing import Any

import orjson

from tenxgraph.core.exceptions import ResourceNotFoundError, StaleStateError, ValidationError
from tenxgraph.records import Range

__all__ = [
    "MAX_VERSION",
    "ORIGIN_KEY",
    "check_version",
    "clip_ranges",
    "fork_into_source",
    "origin_of",
    "restamp",
    "rewind_lost",
    "target_exists",
    "version_missing",
    "with_origin",
]

#: Key of a version's ``values`` JSON object that records the rewind or fork that wrote it:
#: ``{"op": "rewind", "version": N}`` or ``{"op": "fork", "thread_id": ..., "version": N}``.
ORIGIN_KEY = "_tx_origin"
_ORIGIN_NEEDLE = b'"' + ORIGIN_KEY.encode() + b'"'


#: The largest version number a store can hold (a signed 64-bit integer: Postgres ``bigint``,
#: SQLite ``INTEGER``).
MAX_VERSION = 2**63 - 1


def check_version(version: object, field: str = "version") -> int:
    """``version`` when it is a version number a store can hold, checked before any I/O.

    Args:
        version: the number the caller gave (``get_state(version=)``, ``rewind(to_version=)``,
            ``fork(at_version=)``, the CLI's ``--version``).
        field: the argument's name, reported in the error.

    Returns:
        ``version`` (an ``int`` from 1 to :data:`MAX_VERSION`).

    Raises:
        ValidationError: ``VALIDATION_000`` when it is not an ``int`` (``bool`` is refused),
            below 1, or above :data:`MAX_VERSION`; ``context``: ``field``, ``value``.
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValidationError(
            f"{field} must be a positive int, got {version!r}",
            context={"field": field, "value": repr(version)},
        )
    if version > MAX_VERSION:
        raise ValidationError(
            f"{field} {version} is too large: versions are 64-bit integers (at most {MAX_VERSION})",
            context={"field": field, "value": repr(version)},
        )
    return version


def with_origin(values: bytes, origin: dict[str, Any]) -> bytes:
    """``values`` (a JSON object's bytes, as ``serde.encode_values`` makes them, never empty: it
    holds the write token) with ``origin`` added under :data:`ORIGIN_KEY`.

    Args:
        values: encoded state values, ``b"{...}"``.
        origin: JSON-compatible dict (``str`` and ``int`` values).

    Returns:
        The same object with one more key; the other bytes unchanged.
    """
    body = bytes(values).rstrip()
    if not body.endswith(b"}") or body == b"{}":
        return orjson.dumps({**orjson.loads(body or b"{}"), ORIGIN_KEY: origin})
    return body[:-1] + b"," + _ORIGIN_NEEDLE + b":" + orjson.dumps(origin) + b"}"


def restamp(values: bytes | memoryview, token: str, origin: dict[str, Any]) -> bytes:
    """A stored version's ``values`` made into a new version's: the write token replaced by
    ``token`` (``serde.WRITE_TOKEN_KEY``) and ``origin`` recorded under :data:`ORIGIN_KEY`.
    Every other key is kept as stored, including fields the reader's state class does not
    declare, so a rewind or fork by a tool that does not know the application's state class
    (the ``tenxgraph threads`` CLI) loses nothing. Values are JSON: re-encoding them is exact.

    Raises:
        SerializationError: ``STORAGE_SERIALIZATION_000`` when the stored values are not a JSON
            object (a damaged row).
    """
    from tenxgraph.storage import serde

    data = orjson.loads(bytes(values))
    if not isinstance(data, dict):
        from tenxgraph.core.exceptions import SerializationError

        raise SerializationError(
            "the stored values of the version are not a JSON object; the row is damaged",
            context={"path": "$", "type": type(data).__name__},
        )
    data[serde.WRITE_TOKEN_KEY] = token
    data[ORIGIN_KEY] = origin
    return orjson.dumps(data)


def origin_of(values: bytes | memoryview) -> dict[str, Any] | None:
    """The origin a rewind or fork recorded in a version's ``values`` (see :data:`ORIGIN_KEY`),
    or ``None`` (an ordinary version; answered without parsing when the key is absent)."""
    data = bytes(values)
    if _ORIGIN_NEEDLE not in data:
        return None
    try:
        found = orjson.loads(data).get(ORIGIN_KEY)
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return found if isinstance(found, dict) else None


def clip_ranges(ranges: tuple[Range, ...], below: int) -> tuple[Range, ...]:
    """The part of ``ranges`` whose seqs are below ``below``, in list order, empty ranges left
    out: the rows a fork copies from its source (rows at or above the source version's
    ``next_seq`` are the fork's own new rows)."""
    out: list[Range] = []
    for s, e in ranges:
        e = min(e, below)
        if e > s:
            out.append((s, e))
    return tuple(out)


def version_missing(
    thread_id: str, version: int, oldest: int | None, latest: int | None
) -> ResourceNotFoundError:
    """The ``STORAGE_NOT_FOUND_000`` error of a version that is not kept.

    Args:
        thread_id: the thread.
        version: the version asked for.
        oldest: the oldest kept version (``None``: the thread does not exist for the caller).
        latest: the latest version (``None`` likewise).

    Returns:
        The error; ``context``: ``thread_id``, ``version``, ``oldest_kept``, ``latest``.
    """
    if oldest is None or latest is None:
        text = f"thread {thread_id!r} does not exist, so it has no version {version}"
    elif version > latest or version < 1:
        text = (
            f"thread {thread_id!r} has no version {version}: its versions run from "
            f"{oldest} to {latest}"
        )
    else:
        text = (
            f"version {version} of thread {thread_id!r} was pruned (state_history_limit); "
            f"the oldest kept version is {oldest} (latest {latest})"
        )
    return ResourceNotFoundError(
        text,
        context={
            "thread_id": thread_id,
            "version": version,
            "oldest_kept": oldest,
            "latest": latest,
        },
    )


def fork_into_source(thread_id: str) -> ValidationError:
    """The ``VALIDATION_000`` error of a fork whose target is its own source thread (refused
    before any I/O: a fork creates a new thread; ``rewind`` moves a thread back).
    ``context``: ``field`` (``to_thread_id``), ``thread_id``."""
    return ValidationError(
        f"cannot fork thread {thread_id!r} into itself: a fork creates a new thread, so give "
        "another to_thread_id (to move this thread back to an earlier version, use rewind)",
        context={"field": "to_thread_id", "thread_id": thread_id},
    )


def target_exists(thread_id: str, current: int | None) -> StaleStateError:
    """The ``STORAGE_CONFLICT_000`` error of a fork into a thread that exists: the fork is a
    compare-and-swap against "no such thread" (expected version 0), as a thread's first write
    is. ``context``: ``thread_id``, ``expected_version`` (0), ``current_version``."""
    return StaleStateError(
        f"cannot fork into thread {thread_id!r}: it already exists (version {current}); "
        "fork into a new thread_id",
        context={"thread_id": thread_id, "expected_version": 0, "current_version": current},
    )


def rewind_lost(exc: StaleStateError, to_version: int) -> StaleStateError:
    """The ``STORAGE_CONFLICT_000`` error of a rewind that lost its compare-and-swap: ``exc``'s
    context, and a message saying what was cleared and what to do (the caller's
    ``config["_checkpoint_version"]`` has been removed, so calling again compares against a
    fresh read of the head)."""
    ctx = dict(exc.context)
    current, expected = ctx.get("current_version"), ctx.get("expected_version")
    return StaleStateError(
        f"rewind of thread {ctx.get('thread_id')!r} to version {to_version} refused: the "
        f"thread is at version {current}, the config expected {expected} (another writer "
        "moved it; nothing was written). config['_checkpoint_version'] was removed: inspect "
        "the thread again (get_state or get_state_history with this config) and call rewind "
        "again, or call it again now to rewind over whatever the head is",
        context=ctx,
    )
