"""The tenxgraph error family.

Every error carries a stable ``error_code`` (10xGraph's catalogue, e.g. ``STORAGE_CONFLICT_000``)
and a ``context`` dict of documented keys; ``str(err)`` starts with ``[CODE]`` so logs can be
grepped. Codes live in one registry, :data:`ERROR_CODES`, and a test keeps it in sync with the
classes. Driver errors (sqlite3, psycopg, redis-py) are translated into this family by the storage
tier that meets them; they never leak raw.

Secrets never appear in messages: callers pass DSNs and URLs through
``redact`` (re-exported here from ``tenxgraph._redact``, the one redaction routine) before
putting them into a message or a context; messages are redacted again on construction.
"""

from __future__ import annotations

from typing import Any

from tenxgraph._redact import redact

__all__ = [
    "ERROR_CODES",
    "CommitOutcomeUnknownError",
    "ConfigError",
    "GraphError",
    "GraphRecursionError",
    "InterruptPendingError",
    "GraphStopRequested",
    "LedgerWriteError",
    "MediaError",
    "MediaNotFoundError",
    "MetricsError",
    "NodeError",
    "NodeTimeoutError",
    "ResourceNotFoundError",
    "RunJoinTimeoutError",
    "SchemaMissingError",
    "SchemaVersionError",
    "SerializationError",
    "DecryptionError",
    "StaleStateError",
    "StorageConnectionError",
    "StorageError",
    "SyncInEventLoopError",
    "TenxGraphError",
    "ThreadBusyError",
    "ToolTimeoutError",
    "TransientStorageError",
    "UnsupportedArgumentError",
    "ValidationError",
    "redact",
]

#: Every error code this package raises, with a one-line meaning. Stable across releases.
ERROR_CODES: dict[str, str] = {
    "GRAPH_000": "generic graph error",
    "GRAPH_001": "invalid node (duplicate or reserved name, unsupported node object)",
    "GRAPH_002": "no entry point: call set_entry_point() or add_edge(START, node)",
    "GRAPH_003": "orphan node: a node that appears in no edge at all",
    "GRAPH_004": "unknown node named in an edge or an interrupt list",
    "GRAPH_005": "a node returned a value of an unsupported type",
    "GRAPH_006": "a router returned a key that is neither a node nor in its path_map",
    "GRAPH_007": "sync API called inside a running event loop; await the async twin",
    "GRAPH_008": "a new input on a thread paused for a human answer",
    "GRAPH_009": "an unknown keyword argument (to StateGraph, compile, a checkpointer ...)",
    "GRAPH_010": "a documented 10xGraph argument whose feature tenxgraph does not provide (yet)",
    "GRAPH_ROUTING_001": "a conditional-edge router raised",
    "NODE_000": "a node failed",
    "RECURSION_000": "a run exceeded its recursion_limit",
    "NODE_TIMEOUT_001": "a node ran longer than node_timeout seconds",
    "TOOL_TIMEOUT_001": "a tool ran longer than tool_timeout seconds",
    "CONFIG_001": "invalid run config (missing, empty, too long or misspelt key)",
    "VALIDATION_000": "invalid input data (message, state update)",
    "VALIDATION_002": "an input validator refused the messages (prompt injection, message policy)",
    "MODEL_001": "a chat model could not produce an answer (provider error, bad response)",
    "MODEL_002": "a structured answer never matched the agent's output_schema",
    "STORAGE_000": "generic storage error",
    "STORAGE_CONFLICT_000": "compare-and-swap lost: the thread moved on since this run read it",
    "STORAGE_TRANSIENT_001": "retryable storage failure (connection lost, pool timeout)",
    "STORAGE_COMMIT_UNKNOWN_001": (
        "the connection broke while a checkpoint write was committing and the outcome could "
        "not be read back: read the thread's version to find out"
    ),
    "STORAGE_SERIALIZATION_000": "a value cannot be encoded or decoded losslessly",
    "STORAGE_SCHEMA_001": "the database schema is newer than this code",
    "STORAGE_SCHEMA_002": "the tenxgraph tables are missing or older than this code: run setup",
    "STORAGE_CONNECT_001": "the store refused the connection for good (authentication, unknown "
    "role or database, unresolvable host, TLS settings): fix the DSN, do not retry",
    "STORAGE_NOT_FOUND_000": "the requested thread, version or record does not exist",
    "STORAGE_FORBIDDEN_001": "the thread belongs to another user",
    "STORAGE_LEDGER_001": "a tool result could not be recorded in the idempotency ledger",
    "STORAGE_CRYPTO_001": (
        "a stored value could not be decrypted and authenticated: its key is not in the "
        "keyring (rotated out or shredded), or the row was altered or moved to another thread, "
        "user, version or position"
    ),
    "STORAGE_BUSY_001": (
        "another run holds the thread's lease (multitask_strategy 'reject'), or a queued run "
        "waited longer than its timeout for it"
    ),
    "MEDIA_000": "a media store or media reference failed (upload, download, decode)",
    "MEDIA_001": "an internal graph://media/ reference met no media store: pass media_store=",
    "MEDIA_NOT_FOUND_000": "no media is stored under the key an internal reference names",
    "METRICS_000": "a metric could not be emitted (logged, never raised by the runtime)",
    "RUN_JOIN_TIMEOUT_001": "a background run did not finish within the timeout given to join",
}


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
        self,
        message: str = "",
        error_code: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> None:
        self.error_code: str = error_code or self.default_code
        self.context: dict[str, Any] = dict(context or {})
        self.message: str = redact(message)
        super().__init__(f"[{self.error_code}] {self.message}")

    def to_dict(self) -> dict[str, Any]:
        """The error as JSON-ready data, for structured logs and API responses.

        Returns:
            ``{"error_type": class name, "error_code": str, "message": str (without the code
            prefix), "context": dict}``.
        """
        return {
            "error_type": type(self).__name__,
            "error_code": self.error_code,
            "message": self.message,
            "context": dict(self.context),
        }

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep code and context across process boundaries (multiprocessing, pickling by users).
        return (_rebuild_error, (type(self), self.message, self.error_code, self.context))


def _rebuild_error(
    cls: type[TenxGraphError], message: str, code: str, context: dict[str, Any]
) -> TenxGraphError:
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


class SyncInEventLoopError(GraphError, RuntimeError):
    """A sync method (``invoke``, ``stream``, ``setup`` ...) was called on a thread that runs an
    event loop (``GRAPH_007``). It is also a ``RuntimeError``, which is what 10xGraph's graph
    reference tells users to expect. Fix: ``await`` the async twin named in the message.

    ``context``: ``method`` (the sync name), ``use`` (the async name).
    """

    default_code = "GRAPH_007"


class UnsupportedArgumentError(GraphError, TypeError):
    """A keyword argument is refused rather than silently ignored.

    ``GRAPH_009``: the argument is unknown (a typo, or an argument of another library);
    ``context["did_you_mean"]`` names the closest accepted one when there is one.
    ``GRAPH_010``: 10xGraph documents the argument but tenxgraph does not provide its feature
    (yet); ``docs/compat-10xgraph.md`` lists these. Also a ``TypeError``, which is what Python
    raises for an unexpected keyword argument.

    ``context``: ``argument``, ``where`` (e.g. ``"StateGraph"``), ``did_you_mean`` (or
    ``None``).
    """

    default_code = "GRAPH_009"


def check_arguments(
    where: str,
    given: dict[str, Any],
    accepted: tuple[str, ...],
    not_supported: dict[str, str] | None = None,
    hints: dict[str, str] | None = None,
) -> None:
    """Refuse unknown keyword arguments and documented-but-unsupported ones.

    Args:
        where: the callable's name for the message (``"StateGraph"``, ``"compile"``).
        given: the extra keyword arguments received (``**kwargs``), name -> value.
        accepted: the names the callable accepts explicitly (for ``did_you_mean``).
        not_supported: documented 10xGraph arguments tenxgraph lacks, name -> why; passing
            one of them with a value other than ``None`` is refused with ``GRAPH_010``
            (``None`` is their documented default and means "not used").
        hints: unknown names that some page of 10xGraph's docs uses, name -> where the
            setting belongs instead; refused with ``GRAPH_009`` and that hint.

    Raises:
        UnsupportedArgumentError: ``GRAPH_009`` for an unknown name, ``GRAPH_010`` for a
            documented argument whose feature is not provided.
    """
    import difflib

    not_supported = not_supported or {}
    for name, value in given.items():
        if name in not_supported:
            if value is None:
                continue
            raise UnsupportedArgumentError(
                f"{where}({name}=...) is not supported yet: {not_supported[name]}. Remove the "
                "argument (see docs/compat-10xgraph.md)",
                error_code="GRAPH_010",
                context={"argument": name, "where": where, "did_you_mean": None},
            )
        if hints and name in hints:
            raise UnsupportedArgumentError(
                f"{where}() does not take {name!r}: {hints[name]}",
                context={"argument": name, "where": where, "did_you_mean": None},
            )
        close = difflib.get_close_matches(
            name, list(accepted) + list(not_supported), n=1, cutoff=0.75
        )
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnsupportedArgumentError(
            f"{where}() got an unknown keyword argument {name!r}{hint} Accepted: "
            f"{', '.join(accepted)}",
            context={"argument": name, "where": where, "did_you_mean": close[0] if close else None},
        )


class InterruptPendingError(GraphError, ValueError):
    """A new input arrived on a thread paused by ``interrupt()`` for a human answer
    (``GRAPH_008``).

    Resume it with ``invoke({"resume": answer}, config)`` or edit it with ``update_state``.
    ``context``: ``thread_id``, ``node``, ``interrupt_ids``. Also a ``ValueError``: the input
    is not acceptable in the thread's state (10xGraph reports bad input as ``ValueError``).
    """

    default_code = "GRAPH_008"


class GraphRecursionError(GraphError):
    """A run executed more than ``recursion_limit`` nodes (``RECURSION_000``).

    The state reached so far is checkpointed before this is raised. ``context``:
    ``thread_id``, ``recursion_limit``, ``node`` (the node that would have run next).
    """

    default_code = "RECURSION_000"


class NodeError(GraphError):
    """A node failed (``NODE_000``, or ``NODE_001`` and above for specific failures).

    Base of ``NodeTimeoutError``. ``context`` may hold ``node``.
    """

    default_code = "NODE_000"


class NodeTimeoutError(NodeError):
    """A node ran longer than ``node_timeout`` seconds (``NODE_TIMEOUT_001``).

    ``context``: ``node``, ``timeout_s``. The last checkpoint (before the node) stays current, so
    the node is replayed on resume.
    """

    default_code = "NODE_TIMEOUT_001"


class ToolTimeoutError(NodeTimeoutError):
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
    """Invalid input data (``VALIDATION_000``): a message with an unknown role, a state update for
    an unknown field, an input that is not a dict. Raised before anything is written.

    ``context``: ``field`` and ``reason`` where known.
    """

    default_code = "VALIDATION_000"


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


class ThreadBusyError(StaleStateError):
    """Another run holds the thread's run lease (``STORAGE_BUSY_001``).

    Raised before any node of this run ran and before anything was written: with
    ``multitask_strategy="reject"`` at once, with ``"enqueue"`` (and for a resume) when the wait
    for the lease exceeded its timeout. A ``StaleStateError`` subclass, so a retry loop written
    for the compare-and-swap (10xGraph's durability guide) handles it unchanged. ``context``:
    ``thread_id``, ``expected_version`` (the version this run read, ``None`` when it read
    nothing yet), ``current_version`` (the same: the busy thread has not moved for this run),
    ``lease_expires_in_s`` (seconds until the holder's lease lapses unless renewed; ``None``
    when unknown), ``strategy`` and, after a wait, ``waited_s``.
    """

    default_code = "STORAGE_BUSY_001"


class TransientStorageError(StorageError):
    """A retryable storage failure (``STORAGE_TRANSIENT_001``): connection lost, server
    restarting, pool timeout, serialization failure or deadlock (SQLSTATE classes 08, 40, 53, 57).

    No partial write is ever visible after it. ``context``: ``backend``, ``sqlstate`` where known.
    """

    default_code = "STORAGE_TRANSIENT_001"


class StorageConnectionError(StorageError):
    """The store cannot be connected to and retrying will not help (``STORAGE_CONNECT_001``).

    Raised on the first connection attempt, without waiting for a pool timeout, when the
    server rejects the credentials (wrong password, unknown role, no ``pg_hba.conf`` entry),
    the database does not exist, the host name cannot be resolved, or the TLS settings cannot
    work. Not a ``TransientStorageError``: fix the DSN or the server's configuration.
    ``context``: ``backend``, ``reason`` (``"password"``, ``"role"``, ``"database"``,
    ``"host"``, ``"tls"``, ``"permission"``), ``target`` (``host:port/dbname``, never the
    password), ``sqlstate`` when the server sent one.
    """

    default_code = "STORAGE_CONNECT_001"


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


class DecryptionError(StorageError):
    """A stored value could not be decrypted and authenticated (``STORAGE_CRYPTO_001``).

    Raised by every read of a checkpointer built with ``cipher=`` (see
    :mod:`tenxgraph.storage.crypto`) whose row is sealed under a key the keyring does not hold
    (rotated out, or a tenant's key deleted: crypto-shredding), or whose ciphertext does not
    authenticate against where it was read: a row altered, or copied to another thread, user,
    version, message position or table. Nothing of such a row is returned. Not a
    :class:`SerializationError`: a listing that skips undecodable rows does not skip this one.
    ``context``: ``table``, ``thread_id``, ``position`` (version, message seq or ledger call
    key), ``key_id`` (``None`` when the row is not a sealed envelope), ``reason``
    (``"unknown_key"``, ``"not_sealed"``, ``"authentication"``, or ``"no_cipher"``: a sealed
    row read by a checkpointer without ``cipher=``).
    """

    default_code = "STORAGE_CRYPTO_001"


class SchemaVersionError(StorageError):
    """The database schema is newer than this code understands (``STORAGE_SCHEMA_001``).

    Upgrade tenxgraph. ``context``: ``found`` and ``supported`` schema versions.
    """

    default_code = "STORAGE_SCHEMA_001"


class SchemaMissingError(SchemaVersionError):
    """The tenxgraph tables are missing or older than this code (``STORAGE_SCHEMA_002``).

    Raised by read-only access (``acheck_schema``, the ``tenxgraph`` CLI's read commands), which
    never create or migrate anything: run ``setup()`` / ``tenxgraph setup`` first.
    ``context``: ``found`` (``None`` when there are no tables) and ``supported``.
    """

    default_code = "STORAGE_SCHEMA_002"


class ResourceNotFoundError(StorageError):
    """A requested thread, version or record does not exist (``STORAGE_NOT_FOUND_000``).

    Also what another user sees for a thread they do not own when reading a specific record.
    ``context``: ``thread_id`` and ``version`` where relevant.
    """

    default_code = "STORAGE_NOT_FOUND_000"


class MediaError(StorageError, RuntimeError):
    """A media store or media reference failed (``MEDIA_000``), or an internal
    ``graph://media/{key}`` reference had to be resolved without a media store (``MEDIA_001``:
    pass ``media_store=`` to ``compile()`` or to the resolver). Also a ``RuntimeError``, as
    10xGraph raises one there. ``context``: ``key`` and ``backend`` where known.
    """

    default_code = "MEDIA_000"


class MediaNotFoundError(StorageError, KeyError):
    """No media is stored under a key (``MEDIA_NOT_FOUND_000``); also a ``KeyError``, as
    10xGraph's media stores raise one. ``context``: ``key``.
    """

    default_code = "MEDIA_NOT_FOUND_000"

    def __str__(self) -> str:
        # KeyError would quote the text; keep the family's "[CODE] message" form.
        return f"[{self.error_code}] {self.message}"


class LedgerWriteError(StorageError):
    """A tool result could not be recorded in the idempotency ledger (``STORAGE_LEDGER_001``).

    The run stops and the thread does not advance. The tool did run but is not recorded, so a
    resume runs it again: reconcile the call named in ``context`` first (tools with external
    side effects should pass ``tool_call_id`` downstream as an idempotency key).
    ``context``: ``thread_id``, ``tool_call_id``, ``tool``.
    """

    default_code = "STORAGE_LEDGER_001"


class MetricsError(StorageError):
    """A metric could not be emitted (``METRICS_000``).

    Part of 10xGraph's catalogue (a ``StorageError`` there too). tenxgraph's runtime never
    raises it: metrics go through the OpenTelemetry API, whose failures are logged and never
    interrupt a run. Applications may raise it from their own instrumentation.
    """

    default_code = "METRICS_000"


class RunJoinTimeoutError(TenxGraphError, TimeoutError):
    """``ajoin`` / ``join`` waited ``timeout`` seconds and the background run had not finished
    (``RUN_JOIN_TIMEOUT_001``); the run goes on (join again, or ``astop`` it).

    ``context``: ``thread_id``, ``run_id``, ``status`` (the run's status when the wait ended),
    ``timeout_s``.
    """

    default_code = "RUN_JOIN_TIMEOUT_001"


class GraphStopRequested(Exception):  # noqa: N818 - 10xGraph's public name
    """Control-flow signal: a stop was requested while a node was running.

    Not an error and not part of the ``TenxGraphError`` family (no ``error_code``). In 10xGraph
    it tells a node cancelled by a stop apart from a failing node. tenxgraph's runtime honours
    stop requests between nodes and does not raise it; it is importable so that code written
    for 10xGraph which names it (``except GraphStopRequested: raise``) runs unchanged.

    Args:
        node_name (str): the node that was running when the stop arrived.

    Attributes:
        node_name (str): as given.
    """

    def __init__(self, node_name: str = "") -> None:
        self.node_name = node_name
        super().__init__(f"stop requested while node {node_name!r} was running")


def forbidden(thread_id: str) -> StorageError:
    """Build the ``STORAGE_FORBIDDEN_001`` error for ``thread_id`` (the owner is not revealed)."""
    return StorageError(
        f"thread {thread_id!r} belongs to another user; pass that user's user_id or use another "
        "thread_id",
        error_code="STORAGE_FORBIDDEN_001",
        context={"thread_id": thread_id},
    )


def stale(
    thread_id: str, expected: int, current: int | None, fence: int | None = None
) -> StaleStateError:
    """Build a :class:`StaleStateError` with the documented context keys (``fence`` too when
    the refused write was a lease holder's: whatever refused it, that holder lost the thread)."""
    context: dict[str, Any] = {
        "thread_id": thread_id,
        "expected_version": expected,
        "current_version": current,
    }
    if fence is not None:
        context["fence"] = fence
    return StaleStateError(
        f"thread {thread_id!r} is at version {current}, this run expected {expected}; "
        "another run wrote first. Call again: the next read sees the winner's state",
        context=context,
    )


def fence_lost(thread_id: str, expected: int, fence: int) -> StaleStateError:
    """Build the :class:`StaleStateError` of a checkpoint write whose run lease was taken over
    (its fencing token is no longer the thread's): refused exactly like a lost
    compare-and-swap, with ``context["fence"]`` added."""
    return StaleStateError(
        f"thread {thread_id!r}: this run's lease lapsed and another run took the thread over "
        f"(fence {fence} is stale), so this checkpoint (version {expected + 1}) was refused. "
        "Call again: the next run waits for the thread and reads the winner's state",
        context={
            "thread_id": thread_id,
            "expected_version": expected,
            "current_version": expected,
            "fence": fence,
        },
    )


def lease_lost(thread_id: str, expected: int, fence: int) -> StaleStateError:
    """Build the :class:`StaleStateError` of a run that found, before a tool call, that its
    run lease lapsed (another run may hold the thread): the call is not made, and nothing
    more of the run is written. ``current_version`` is ``None``: not read."""
    return StaleStateError(
        f"thread {thread_id!r}: this run's lease lapsed (fence {fence}) before a tool call, so "
        "the call was not made and the run stops; another run may hold the thread. Call "
        "again: the next run waits for the thread and reads the winner's state",
        context={
            "thread_id": thread_id,
            "expected_version": expected,
            "current_version": None,
            "fence": fence,
        },
    )
