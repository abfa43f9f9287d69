"""The tenxgraph error family.

Every error carries a stable ``error_code`` (10xGraph's catalogue, e.g. ``STORAGE_CONFLICT_000``)
and a ``context`` dict of documented keys; ``str(err)`` starts with ``[CODE]`` so logs can be
grepped. Codes live in one registry, :data:`ERROR_CODES`, and a test keeps it in sync with the
classes. Driver errors (sqlite3, psycopg, redis-py) are translated into this family by the storage
tier that meets them; they never leak raw.

Secrets never appear in messages: callers pass DSNs and URLs through
:func:`tenxgraph.core.exceptions.redact` before putting them into a message or a context.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "ERROR_CODES",
    "CommitOutcomeUnknownError",
    "ConfigError",
    "GraphError",
    "GraphRecursionError",
    "InterruptPendingError",
    "LedgerWriteError",
    "NodeTimeoutError",
    "ResourceNotFoundError",
    "SchemaVersionError",
    "SerializationError",
    "StaleStateError",
    "StorageError",
    "TenxGraphError",
    "ToolTimeoutError",
    "TransientStorageError",
    "ValidationError",
    "redact",
]

#: Every error code this package raises, with a one-line meaning. Stable across releases.
ERROR_CODES: dict[str, str] = {
    "GRAPH_000": "generic graph error",
    "GRAPH_001": "invalid node (duplicate or reserved name, unsupported node object)",
    "GRAPH_002": "no entry point: call set_entry_point() or add_edge(START, node)",
    "GRAPH_003": "orphan node: a node that no path from the entry point reaches",
    "GRAPH_004": "unknown node named in an edge or an interrupt list",
    "GRAPH_005": "a node returned a value of an unsupported type",
    "GRAPH_006": "a router returned a key that is neither a node nor in its path_map",
    "GRAPH_007": "sync API called inside a running event loop; await the async twin",
    "GRAPH_008": "a new input on a thread paused for a human answer",
    "GRAPH_ROUTING_001": "a conditional-edge router raised",
    "GRAPH_RECURSION_001": "a run exceeded its recursion_limit",
    "NODE_TIMEOUT_001": "a node ran longer than node_timeout seconds",
    "TOOL_TIMEOUT_001": "a tool ran longer than tool_timeout seconds",
    "CONFIG_001": "invalid run config (missing, empty, too long or misspelt key)",
    "VALIDATION_001": "invalid input data (message, state update)",
    "MODEL_001": "a chat model could not produce an answer (provider error, bad response)",
    "STORAGE_000": "generic storage error",
    "STORAGE_CONFLICT_000": "compare-and-swap lost: the thread moved on since this run read it",
    "STORAGE_TRANSIENT_001": "retryable storage failure (connection lost, pool timeout)",
    "STORAGE_COMMIT_UNKNOWN_001": (
        "the connection broke while a checkpoint write was committing and the outcome could "
        "not be read back: read the thread's version to find out"
    ),
    "STORAGE_SERIALIZATION_000": "a value cannot be encoded or decoded losslessly",
    "STORAGE_SCHEMA_001": "the database schema is newer than this code",
    "STORAGE_NOT_FOUND_001": "the requested thread, version or record does not exist",
    "STORAGE_FORBIDDEN_001": "the thread belongs to another user",
    "STORAGE_LEDGER_001": "a tool result could not be recorded in the idempotency ledger",
}

_SECRET_PATTERNS = (
    # scheme://user:password@host -> scheme://user:***@host
    re.compile(r"(?P<pre>[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]*:)(?P<secret>[^@\s]+)(?P<post>@)"),
    # password=... / pass=... in a libpq key/value DSN or a query string
    re.compile(r"(?P<pre>\b(?:password|passwd|pass|pwd)\s*=\s*)(?P<secret>[^\s&;]+)(?P<post>)", re.I),
)


def redact(text: object) -> str:
    """Return ``str(text)`` with passwords in URLs and DSNs replaced by ``***``.

    Args:
        text: any object; typically a DSN (``postgresql://u:pw@h/db``, ``host=h password=pw``)
            or a Redis URL (``redis://:pw@h:6379/0``), or a driver error message quoting one.

    Returns:
        The text with every password component masked.
    """
    out = str(text)
    for pattern in _SECRET_PATTERNS:
        out = pattern.sub(lambda m: f"{m.group('pre')}***{m.group('post')}", out)
    return out


class TenxGraphError(Exception):
    """Base of every tenxgraph error.

    Args:
        message: what went wrong and how to fix it.
        error_code: stable code from :data:`ERROR_CODES`; defaults to the class's ``default_code``.
        context: structured details (documented per subclass). Values must not hold secrets,
            message contents or raw user ids.

    Attributes:
        error_code (str): the stable code; ``str(err)`` starts with ``[error_code]``.
        context (dict[str, Any]): structured details.
        message (str): the human message without the code prefix.
    """

    default_code = "GRAPH_000"

    def __init__(
        self, message: str = "", error_code: str | None = None, context: dict[str, Any] | None = None
    ) -> None:
        self.error_code: str = error_code or self.default_code
        self.context: dict[str, Any] = dict(context or {})
        self.message: str = redact(message)
        super().__init__(f"[{self.error_code}] {self.message}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep code and context across process boundaries (multiprocessing, pickling by users).
        return (_rebuild_error, (type(self), self.message, self.error_code, self.context))


def _rebuild_error(cls: type[TenxGraphError], message: str, code: str, context: dict[str, Any]):
    err = cls.__new__(cls)
    TenxGraphError.__init__(err, message, code, context)
    return err


class GraphError(TenxGraphError):
    """Invalid graph structure or routing (``GRAPH_*`` codes).

    Raised by ``StateGraph.compile()`` (``GRAPH_002`` no entry point, ``GRAPH_003`` orphan node,
    ``GRAPH_004`` unknown node in an edge or interrupt list, ``GRAPH_001`` invalid node) and at
    run time (``GRAPH_005`` unsupported node return type, ``GRAPH_006`` unknown routing key,
    ``GRAPH_ROUTING_001`` a router raised, ``GRAPH_007`` sync call inside an event loop,
    ``GRAPH_008`` new input while paused for a human). ``context`` may hold ``node``, ``nodes``.
    """

    default_code = "GRAPH_000"


class InterruptPendingError(GraphError):
    """A new input arrived on a thread paused for a human answer (``GRAPH_008``).

    Resume it with ``invoke({"resume": answer}, config)`` or edit it with ``update_state``.
    ``context``: ``thread_id``, ``node``, ``interrupt_ids``.
    """

    default_code = "GRAPH_008"


class GraphRecursionError(GraphError):
    """A run executed more than ``recursion_limit`` nodes (``GRAPH_RECURSION_001``).

    The state reached so far is checkpointed before this is raised. ``context``:
    ``thread_id``, ``recursion_limit``, ``node`` (the node that would have run next).
    """

    default_code = "GRAPH_RECURSION_001"


class NodeTimeoutError(GraphError):
    """A node ran longer than ``node_timeout`` seconds (``NODE_TIMEOUT_001``).

    ``context``: ``node``, ``timeout_s``. The last checkpoint (before the node) stays current, so
    the node is replayed on resume.
    """

    default_code = "NODE_TIMEOUT_001"


class ToolTimeoutError(GraphError):
    """A tool ran longer than ``tool_timeout`` seconds (``TOOL_TIMEOUT_001``).

    ``ToolNode`` turns it into an error tool message for the model; it is raised only when the
    tool is called outside a ``ToolNode``. ``context``: ``tool``, ``tool_call_id``, ``timeout_s``.
    """

    default_code = "TOOL_TIMEOUT_001"


class ConfigError(TenxGraphError, ValueError):
    """Invalid run ``config`` (``CONFIG_001``): empty or over-long ``thread_id``, a key that looks
    like a misspelling of a known key (``thread-id``), a value of the wrong type.

    ``context``: ``key`` and, for misspellings, ``did_you_mean``. Raised before anything is written.
    """

    default_code = "CONFIG_001"


class ValidationError(TenxGraphError, ValueError):
    """Invalid input data (``VALIDATION_001``): a message with an unknown role, a state update for
    an unknown field, an input that is not a dict. Raised before anything is written.

    ``context``: ``field`` and ``reason`` where known.
    """

    default_code = "VALIDATION_001"


class StorageError(TenxGraphError):
    """Base of storage errors (``STORAGE_000``), and the forbidden-access error
    (``STORAGE_FORBIDDEN_001``): a write, delete or ledger access by a user who does not own the
    thread. The owner is never revealed; ``context`` holds ``thread_id`` only.
    """

    default_code = "STORAGE_000"


class StaleStateError(StorageError):
    """A compare-and-swap write lost (``STORAGE_CONFLICT_000``).

    The thread's version moved past the one this run read. Nothing of the losing write is
    visible and every cache tier has dropped the thread. Recovery: call again; the next read
    sees the winner's state. ``context``: ``thread_id``, ``expected_version``,
    ``current_version`` (``None`` when the thread no longer exists).
    """

    default_code = "STORAGE_CONFLICT_000"


class TransientStorageError(StorageError):
    """A retryable storage failure (``STORAGE_TRANSIENT_001``): connection lost, server
    restarting, pool timeout, serialization failure or deadlock (SQLSTATE classes 08, 40, 53, 57).

    No partial write is ever visible after it. ``context``: ``backend``, ``sqlstate`` where known.
    """

    default_code = "STORAGE_TRANSIENT_001"


class CommitOutcomeUnknownError(StorageError):
    """A checkpoint write's outcome is unknown (``STORAGE_COMMIT_UNKNOWN_001``).

    The connection broke after the write was sent and before the server's answer arrived, and
    reading the thread back (to recognise the write by its token) failed too. The write either
    committed entirely or not at all; nothing partial is visible. Find out by reading the
    thread's state or version (``get_state`` / ``get_state_history``): the write committed when
    the thread is at ``context["attempted_version"]`` and that version's
    ``execution_meta.run_id`` is this run's. Re-sending the same input ``Message`` (same
    ``message_id``) is always safe: a turn whose input a finished run already consumed returns
    that run's result without running the graph again. Not a subclass of
    ``TransientStorageError``: blindly retrying the write could apply it twice.
    ``context``: ``thread_id``, ``attempted_version``, ``backend``, ``sqlstate``.
    """

    default_code = "STORAGE_COMMIT_UNKNOWN_001"


class SerializationError(StorageError):
    """A value cannot be stored losslessly (``STORAGE_SERIALIZATION_000``).

    Raised before anything is written, and by every read whose stored row cannot be decoded
    (a damaged row, a state class changed incompatibly). ``context``: ``path`` (JSONPath of the
    value, e.g. ``$.profile.created``), ``type`` (the value's type name or the decoding error's
    kind); on reads also ``thread_id`` and ``version`` (``None`` for thread metadata and ledger
    rows).
    """

    default_code = "STORAGE_SERIALIZATION_000"


class SchemaVersionError(StorageError):
    """The database schema is newer than this code understands (``STORAGE_SCHEMA_001``).

    Upgrade tenxgraph. ``context``: ``found`` and ``supported`` schema versions.
    """

    default_code = "STORAGE_SCHEMA_001"


class ResourceNotFoundError(StorageError):
    """A requested thread, version or record does not exist (``STORAGE_NOT_FOUND_001``).

    Also what another user sees for a thread they do not own when reading a specific record.
    ``context``: ``thread_id`` and ``version`` where relevant.
    """

    default_code = "STORAGE_NOT_FOUND_001"


class LedgerWriteError(StorageError):
    """A tool result could not be recorded in the idempotency ledger (``STORAGE_LEDGER_001``).

    The run stops and the thread does not advance. The tool did run but is not recorded, so a
    resume runs it again: reconcile the call named in ``context`` first (tools with external
    side effects should pass ``tool_call_id`` downstream as an idempotency key).
    ``context``: ``thread_id``, ``tool_call_id``, ``tool``.
    """

    default_code = "STORAGE_LEDGER_001"


def forbidden(thread_id: str) -> StorageError:
    """Build the ``STORAGE_FORBIDDEN_001`` error for ``thread_id`` (the owner is not revealed)."""
    return StorageError(
        f"thread {thread_id!r} belongs to another user; pass that user's user_id or use another "
        "thread_id",
        error_code="STORAGE_FORBIDDEN_001",
        context={"thread_id": thread_id},
    )


def stale(thread_id: str, expected: int, current: int | None) -> StaleStateError:
    """Build a :class:`StaleStateError` with the documented context keys."""
    return StaleStateError(
        f"thread {thread_id!r} is at version {current}, this run expected {expected}; "
        "another run wrote first. Call again: the next read sees the winner's state",
        context={"thread_id": thread_id, "expected_version": expected, "current_version": current},
    )
