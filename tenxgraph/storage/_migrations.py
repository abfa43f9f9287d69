"""The Postgres schema as an ordered, append-only list of steps; ``index + 1`` is the version.

Each step is a tuple of DDL templates (table placeholders as in :mod:`tenxgraph.storage._sql`)
run by :meth:`tenxgraph.storage.postgres.PostgresStore.asetup` in ONE transaction together with
its row in the migrations table, under a transaction-level advisory lock, so a step is applied
exactly once even when several processes set up at the same moment. Never edit or reorder a
released step: add a new one (DBOS and LangGraph's Postgres saver keep their migrations the same
way).

Two layouts, one list of steps (:func:`render_step`): the plain layout, and the opt-in
hash-partitioned layout (``PostgresStore(..., partitions=N)`` on a fresh schema) in which the
five thread-keyed tables are ``PARTITION BY HASH (thread_id)`` with N partitions each. A
``CREATE TABLE`` of a thread-keyed table ends with its ``{<table>_layout}`` placeholder and the
step lists the table in ``creates``; the plain layout renders each released step exactly as it
always did. The layout is not a schema version: a later step follows the layout found in the
database (docs/deployment.md).

Schema (all tables prefixed, default ``tenxgraph_``, in the configured schema; every primary key
starts with ``thread_id`` so the tables can be distributed on it):

* ``threads``: one row per thread: ``owner``, latest ``version``, ``status``, ``created_at`` /
  ``updated_at`` (UNIX seconds, ``double precision``), ``metadata`` (orjson ``bytea``),
  ``stop_requested``. ``fillfactor`` 80 and no index on the columns a write changes, so the
  per-write update stays a HOT update.
* ``checkpoints``: ``(thread_id, version)``: ``"values"`` (orjson ``bytea``), ``ranges``
  (flat ``int8[]`` of ``[start, end)`` seq intervals in list order), ``min_seq`` (smallest
  start, or ``next_seq`` when empty), ``next_seq``, ``status``, ``created_at``.
* ``messages``: ``(thread_id, seq)``: ``data`` (orjson ``bytea``). Written once, shared by every
  version whose ranges cover it.
* ``tool_executions`` (version 3): ``(thread_id, call_key)``: ``tool_call_id``, ``tool_name``,
  ``result`` (orjson ``bytea``), ``created_at``. ``call_key``, ``tool_call_id`` and
  ``tool_name`` come from the model and may hold any character (NUL, lone surrogates), which
  ``text`` cannot store: they are ``bytea`` holding UTF-8 (``surrogatepass``).
* ``stop_requests`` (version 4): ``(thread_id, owner)``: ``requested_at`` (UNIX seconds,
  ``double precision``): the newest stop request of that user for that thread. A row may exist
  before the thread's first checkpoint (a run's first node can be stopped); a run honours only
  a request made after it started. Supersedes ``threads.stop_requested``, no longer read.
* ``thread_leases`` and ``lease_waiters`` (version 5): the run lease of the multitask
  strategies (holder, fencing token, expiry on the server's clock) and the runs queued for it;
  see :mod:`tenxgraph.storage._lease_sql`. ``fillfactor`` 80: renewals stay HOT updates.
* ``thread_leases.settled_version`` (version 6): the thread's version when its lease was last
  released (by the holder's last checkpoint write or by a release), ``-1`` once a grant took
  the lease over from a holder that had not released it. A run's first read takes the lease in
  the same statement; when that acquisition had to wait for the previous holder's final write,
  the read's snapshot predates that write, and this column tells the run to read again.
* ``thread_leases.wanted`` (version 9): set by an acquisition attempt that was refused and
  queued, cleared by the next grant. A release reads it from the row it updates (after
  waiting for that row's lock), so a waiter whose attempt committed while the release waited
  (too late for the release's snapshot of ``lease_waiters``) is still woken (``NOTIFY``).
* ``runs`` (version 7): ``(thread_id, run_id)``: the submitted (background) runs: ``owner``,
  ``status``, ``input`` and ``config`` (orjson ``bytea``), ``attempts``, ``crashes``,
  ``holder``, ``worker``, ``last_error``, ``output`` (orjson ``bytea``, NULL until done),
  ``created_at`` / ``updated_at``; a partial index on the open ones (``pending``, ``running``)
  for the workers' sweep (:mod:`tenxgraph.core._recovery`, docs/how-to/background-runs.md).
* ``cache_keys`` (version 8): one row, ``mac_key``
  (32 random bytes drawn by the server when the step runs), the key of the keyed MACs on Redis
  cache entries when the application passes no ``cache_mac_key`` (see
  :mod:`tenxgraph.storage._cache_mac`). Readable by whoever can read the schema, never sent to
  Redis.
* ``threads.ttl_s`` and ``runs_owner_idx`` (version 10): a thread's own retention time to
  live in seconds (``NULL``: the checkpointer's ``thread_ttl_s``; see
  :mod:`tenxgraph.storage.retention`) and the index on ``runs (owner)`` that erasing a user
  reads.

``bytea`` rather than ``jsonb`` because ``jsonb`` rejects ``\\u0000``, which tenxgraph stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import LiteralString

from psycopg import sql

from tenxgraph.storage import _sql

__all__ = [
    "CURRENT_VERSION",
    "MAX_PARTITIONS",
    "MIGRATIONS",
    "Migration",
    "PLAIN_STORAGE",
    "render_step",
]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step.

    Attributes:
        summary: one line recorded with the step in the migrations table.
        statements: DDL templates run in order, in one transaction. A ``CREATE TABLE`` of a
            thread-keyed table ends with its ``{<table>_layout}`` placeholder (see
            :func:`render_step`).
        creates: the thread-keyed tables this step creates (placeholder names, e.g.
            ``"threads"``): in the partitioned layout each gets its hash partitions.
    """

    summary: str
    statements: tuple[LiteralString, ...]
    creates: tuple[str, ...] = ()


#: The steps, oldest first; ``MIGRATIONS[i]`` brings the schema to version ``i + 1``.
MIGRATIONS: tuple[Migration, ...] = (
    # -- version 1 ------------------------------------------------------------------------------
    Migration(
        "threads, checkpoints (versions as seq ranges) and messages (one row per message)",
        (
            """
CREATE TABLE {threads} (
    thread_id text PRIMARY KEY,
    owner text NOT NULL,
    version bigint NOT NULL,
    status text NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
) {threads_layout}
""",
            """
CREATE TABLE {checkpoints} (
    thread_id text NOT NULL,
    version bigint NOT NULL,
    "values" bytea NOT NULL,
    ranges int8[] NOT NULL,
    min_seq bigint NOT NULL,
    next_seq bigint NOT NULL,
    status text NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (thread_id, version)
) {checkpoints_layout}
""",
            """
CREATE TABLE {messages} (
    thread_id text NOT NULL,
    seq bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (thread_id, seq)
) {messages_layout}
""",
        ),
        creates=("threads", "checkpoints", "messages"),
    ),
    # -- version 2 ------------------------------------------------------------------------------
    Migration(
        "thread metadata, durable stop flags and listing threads by owner",
        (
            r"""
ALTER TABLE {threads}
    ADD COLUMN metadata bytea NOT NULL DEFAULT '\x7b7d'::bytea,
    ADD COLUMN stop_requested boolean NOT NULL DEFAULT false
""",
            """
CREATE INDEX {threads_owner_idx} ON {threads} (owner)
""",
        ),
    ),
    # -- version 3 ------------------------------------------------------------------------------
    Migration(
        "tool_executions: the tool idempotency ledger",
        (
            """
CREATE TABLE {tool_executions} (
    thread_id text NOT NULL,
    call_key bytea NOT NULL,
    tool_call_id bytea NOT NULL,
    tool_name bytea NOT NULL,
    result bytea NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (thread_id, call_key)
) {tool_executions_layout}
""",
        ),
        creates=("tool_executions",),
    ),
    # -- version 4 ------------------------------------------------------------------------------
    Migration(
        "stop_requests: timed stop requests, also for a thread without a checkpoint yet",
        (
            """
CREATE TABLE {stop_requests} (
    thread_id text NOT NULL,
    owner text NOT NULL,
    requested_at double precision NOT NULL,
    PRIMARY KEY (thread_id, owner)
) {stop_requests_layout}
""",
        ),
        creates=("stop_requests",),
    ),
    # -- version 5 ------------------------------------------------------------------------------
    Migration(
        "thread_leases and lease_waiters: the run lease of the multitask strategies",
        (
            """
CREATE TABLE {thread_leases} (
    thread_id text PRIMARY KEY,
    owner text NOT NULL,
    holder text NOT NULL,
    fence bigint NOT NULL,
    expires_at double precision NOT NULL
) {thread_leases_layout}
""",
            """
CREATE TABLE {lease_waiters} (
    thread_id text NOT NULL,
    waiter text NOT NULL,
    arrived_at double precision NOT NULL,
    seen_at double precision NOT NULL,
    PRIMARY KEY (thread_id, waiter)
) {lease_waiters_layout}
""",
        ),
        creates=("thread_leases", "lease_waiters"),
    ),
    # -- version 6 ------------------------------------------------------------------------------
    Migration(
        "thread_leases.settled_version: the version a released lease left, for the folded "
        "acquisition",
        (
            """
ALTER TABLE {thread_leases} ADD COLUMN settled_version bigint NOT NULL DEFAULT 0
""",
        ),
    ),
    # -- version 7 ------------------------------------------------------------------------------
    Migration(
        "runs: submitted (background) runs, recovered by workers",
        (
            """
CREATE TABLE {runs} (
    thread_id text NOT NULL,
    run_id text NOT NULL,
    owner text NOT NULL,
    status text NOT NULL,
    input bytea NOT NULL,
    config bytea NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    crashes integer NOT NULL DEFAULT 0,
    holder text NOT NULL DEFAULT '',
    worker text NOT NULL DEFAULT '',
    last_error text NOT NULL DEFAULT '',
    output bytea,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    PRIMARY KEY (thread_id, run_id)
) {runs_layout}
""",
            """
CREATE INDEX {runs_open_idx} ON {runs} (created_at) WHERE status IN ('pending', 'running')
""",
        ),
        creates=("runs",),
    ),
    # -- version 8 ------------------------------------------------------------------------------
    Migration(
        "cache_keys: the key of the MACs on shared cache entries, 32 random bytes",
        (
            """
CREATE TABLE {cache_keys} (
    id smallint PRIMARY KEY CHECK (id = 1),
    mac_key bytea NOT NULL CHECK (length(mac_key) >= 16)
)
""",
            # gen_random_uuid() draws from the server's strong random source (PostgreSQL
            # 13+); two version-4 UUIDs give 244 random bits.
            """
INSERT INTO {cache_keys} (id, mac_key)
VALUES (1, uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()))
""",
        ),
    ),
    # -- version 9 ------------------------------------------------------------------------------
    Migration(
        "thread_leases.wanted: a refused acquisition waits, so the release must wake it",
        (
            """
ALTER TABLE {thread_leases} ADD COLUMN wanted boolean NOT NULL DEFAULT false
""",
        ),
    ),
    # -- version 10 -----------------------------------------------------------------------------
    Migration(
        "threads.ttl_s (a thread's retention override) and runs_owner_idx (erasing a user)",
        (
            """
ALTER TABLE {threads} ADD COLUMN ttl_s double precision
""",
            """
CREATE INDEX {runs_owner_idx} ON {runs} (owner)
""",
        ),
    ),
)

#: The schema version this code writes and understands.
CURRENT_VERSION: int = len(MIGRATIONS)

#: Storage clause of each thread-keyed table in the plain layout; in the partitioned layout the
#: parent cannot take storage parameters, so each partition gets it instead.
PLAIN_STORAGE: dict[str, LiteralString] = {
    "threads": "WITH (fillfactor = 80)",
    "checkpoints": "",
    "messages": "",
    "tool_executions": "",
    "stop_requests": "",
    "thread_leases": "WITH (fillfactor = 80)",
    "lease_waiters": "",
    "runs": "",
}

#: The largest partition count :func:`render_step` accepts.
MAX_PARTITIONS = 1024


def render_step(
    step: Migration, schema: str, prefix: str, partitions: int | None = None
) -> tuple[LiteralString, ...]:
    """The final DDL of one step, for the plain or the hash-partitioned layout.

    Plain layout (``partitions=None``): each ``{<table>_layout}`` placeholder becomes the
    table's :data:`PLAIN_STORAGE` clause, so the DDL is exactly what the step always created.
    Partitioned layout: it becomes ``PARTITION BY HASH (thread_id)`` and, after the step's
    statements, each table of ``step.creates`` gets ``partitions`` partitions
    ``<prefix><table>_p<i>`` (``MODULUS partitions, REMAINDER i``) carrying the plain storage
    clause. Every primary key starts with ``thread_id``, the partition key, as Postgres requires
    of a unique index on a partitioned table.

    Args:
        step: the migration step.
        schema: Postgres schema (quoted as an identifier).
        prefix: table and index name prefix.
        partitions: ``None`` for the plain layout, else the number of hash partitions
            (1 to :data:`MAX_PARTITIONS`).

    Returns:
        SQL texts to run in order, in the step's transaction.
    """
    idents = _sql.identifiers(schema, prefix)
    layout: dict[str, sql.Composable] = {}
    for table, storage in PLAIN_STORAGE.items():
        clause = storage if partitions is None else _sql.PARTITION_BY_THREAD
        layout[f"{table}_layout"] = sql.SQL(clause)
    out: list[LiteralString] = [
        _sql.render(t, {**idents, **layout}).rstrip() for t in step.statements
    ]
    if partitions is not None:
        for table in step.creates:
            for remainder in range(partitions):
                out.append(
                    _sql.render(
                        _sql.CREATE_PARTITION,
                        {
                            "partition": sql.Identifier(schema, f"{prefix}{table}_p{remainder}"),
                            "parent": idents[table],
                            "modulus": sql.Literal(partitions),
                            "remainder": sql.Literal(remainder),
                            "storage": sql.SQL(PLAIN_STORAGE[table]),
                        },
                    ).rstrip()
                )
    return tuple(out)
