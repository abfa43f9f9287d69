"""Every SQL statement of the Postgres tier, named, with a one-line summary; nothing else.

Conventions:

* Each statement is a :class:`Statement`: a ``name``, a one-line ``summary`` (used in docs and
  as the span's ``db.query.summary``-like description), the ``operation`` reported as
  ``db.operation.name``, and a ``template``. Table names in templates are ``{placeholders}``
  composed with :class:`psycopg.sql.Identifier` once, when a store is built
  (:func:`render_all`), so a configurable schema and table prefix can never inject SQL. Values
  are always parameters (``%(name)b``, sent in binary by the tier), never formatted into text.
* Payloads (``checkpoints."values"``, ``messages.data``, ``tool_executions.result``,
  ``threads.metadata``) are orjson bytes stored as ``bytea``: ``jsonb`` rejects ``\\u0000``,
  which tenxgraph must store, and no statement ever looks inside them.
* A version's message list is ``checkpoints.ranges``: a flat ``int8[]`` ``[s1, e1, s2, e2,
  ...]`` of ``[start, end)`` seq intervals in list order. ``checkpoints.min_seq`` is its smallest
  start (or ``next_seq`` when it holds no message): message rows below the minimum ``min_seq`` of
  every kept version are unreachable.
* Every statement that reads or writes a thread's data carries the owner check
  (``owner = %(owner)b``) itself. The only owner-free reads are the error-path probes, which
  return a yes/no ("owned by the caller?") and the version, never another user's data.
* Every table is keyed by ``thread_id`` first, so the schema can be distributed on it (Citus);
  every statement about one thread filters each table on ``thread_id`` itself.

The migration steps (DDL) live in :mod:`tenxgraph.storage._migrations`; the statements that run
them (advisory lock, version bookkeeping) are here.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import LiteralString

from psycopg import sql

from tenxgraph.storage import _lease_sql

__all__ = [
    "ALL_STATEMENTS",
    "BACKEND_PID",
    "CACHE_MAC_KEY",
    "CHECKPOINT_CAS",
    "CHECKPOINT_CAS_LEASE",
    "CHECKPOINT_CAS_PLAIN",
    "CHECKPOINT_CAS_PRUNE",
    "CHECKPOINT_CREATE",
    "CHECKPOINT_CREATE_PLAIN",
    "CHECKPOINT_WRITES",
    "CLEAR_STOP",
    "CREATE_MIGRATIONS_TABLE",
    "CREATE_PARTITION",
    "CREATE_SCHEMA",
    "CURRENT_VERSION",
    "DELETE_THREAD",
    "ERASE_OWNER",
    "FORK",
    "GET_STOP",
    "GET_THREAD_TTL",
    "RUN_GET",
    "RUN_INSERT",
    "RUN_LIST",
    "RUN_OPEN",
    "RUN_UPDATE",
    "ROTATE_SCAN_CHECKPOINTS",
    "ROTATE_SCAN_MESSAGES",
    "ROTATE_SCAN_LEDGER",
    "ROTATE_SCAN_RUN_INPUTS",
    "ROTATE_SCAN_RUN_OUTPUTS",
    "ROTATE_SWAP_CHECKPOINTS",
    "ROTATE_SWAP_MESSAGES",
    "ROTATE_SWAP_LEDGER",
    "ROTATE_SWAP_RUN_INPUTS",
    "ROTATE_SWAP_RUN_OUTPUTS",
    "HISTORY_CHECKPOINTS",
    "HISTORY_MESSAGES",
    "KEPT_VERSIONS",
    "LEASE_ACQUIRE",
    "LEASE_PEEK",
    "LEASE_READ",
    "LEASE_RELEASE",
    "LEASE_RENEW",
    "LEDGER_COUNT",
    "LEDGER_GET",
    "LEDGER_PUT",
    "LIST_ALL_THREADS",
    "LIST_THREADS",
    "MIGRATION_LOCK",
    "MIGRATION_RECORD",
    "MIGRATION_VERSION",
    "NO_FENCE",
    "NO_VERSION",
    "PARTITION_BY_THREAD",
    "READ_CHECKPOINT",
    "READ_CHECKPOINT_META",
    "READ_SINCE",
    "SCHEMA_EXISTS",
    "SET_METADATA",
    "SET_STOP",
    "SET_THREAD_TTL",
    "Statement",
    "SWEEP_IDLE",
    "TABLE_EXISTS",
    "TABLE_LAYOUT",
    "WRITE_CONFLICT_PROBE",
    "WRITE_OUTCOME_PROBE",
    "identifiers",
    "lease_channel",
    "listen_statement",
    "runs_channel",
    "positional",
    "qualified_name",
    "render",
    "render_all",
]


#: "no version" in a typed int8 parameter that would otherwise be NULL (versions start at 1).
NO_VERSION = -1
#: The ``fence`` parameter of a checkpoint write made outside a run lease (fences start at 1).
NO_FENCE = -1


@dataclass(frozen=True, slots=True)
class Statement:
    """One named SQL statement.

    Attributes:
        name: constant-style name (``"CHECKPOINT_CAS"``).
        summary: one line saying what it does.
        operation: the ``db.operation.name`` reported on spans (``"UPDATE"``, ``"SELECT"`` ...).
        template: SQL text with ``{table}`` placeholders (see :func:`identifiers`) and
            ``%(param)b`` value placeholders; a literal brace is written ``{{`` / ``}}``.
    """

    name: str
    summary: str
    operation: str
    template: LiteralString


# -- checkpoint writes (the hot path) -----------------------------------------------------------


def _checkpoint_write(*, create: bool, lease: bool, prune: bool) -> LiteralString:
    """The template of a checkpoint write: the thread's row (``cas``: created at version 1, or
    moved from ``%(expected)b`` to the next version), then the checkpoint and its new message
    rows, all joined to ``cas``. ``lease`` adds the fence condition to ``cas`` and the
    ``released`` CTE (:mod:`tenxgraph.storage._lease_sql`); ``prune`` (CAS only) adds the
    ``pruned`` and ``unreachable`` deletes."""
    fence: LiteralString = ""
    if lease:
        fence = ("\n     WHERE " if create else "\n       AND ") + _lease_sql.FENCE_CONDITION
    if create:
        head: LiteralString = (
            """
WITH cas AS (
    INSERT INTO {threads} (thread_id, owner, version, status, created_at, updated_at)
    SELECT %(thread_id)b, %(owner)b, 1, %(status)b, %(created_at)b, %(created_at)b"""
            + fence
            + """
    ON CONFLICT (thread_id) DO NOTHING
 RETURNING version
)"""
        )
    else:
        head = (
            """
WITH cas AS (
    UPDATE {threads}
       SET version = version + 1, status = %(status)b, updated_at = %(created_at)b
     WHERE thread_id = %(thread_id)b AND owner = %(owner)b AND version = %(expected)b"""
            + fence
            + """
 RETURNING version
)"""
        )
    released: LiteralString = ", " + _lease_sql.RELEASE_CTE if lease else ""
    body: LiteralString = """, new_checkpoint AS (
    INSERT INTO {checkpoints}
           (thread_id, version, "values", ranges, min_seq, next_seq, status, created_at)
    SELECT %(thread_id)b, cas.version, %(values)b, %(ranges)b::int8[], %(min_seq)b,
           %(next_seq)b, %(status)b, %(created_at)b
      FROM cas
), new_messages AS (
    INSERT INTO {messages} (thread_id, seq, data)
    SELECT %(thread_id)b, m.seq, m.data
      FROM cas, unnest(%(seqs)b::int8[], %(datas)b::bytea[]) AS m(seq, data)
)"""
    pruning: LiteralString = (
        """, pruned AS (
    DELETE FROM {checkpoints} AS c
     USING cas
     WHERE c.thread_id = %(thread_id)b AND c.version <= %(prune_to)b::int8
), unreachable AS (
    DELETE FROM {messages} AS m
     USING cas,
           (SELECT least(%(min_seq)b::int8, min(k.min_seq)) AS floor,
                   max(k.version) AS seen
              FROM {checkpoints} AS k
             WHERE k.thread_id = %(thread_id)b
               AND k.version > %(prune_to)b::int8 AND k.version <= %(expected)b::int8) AS f
     WHERE m.thread_id = %(thread_id)b
       AND %(prune_to)b::int8 >= 0
       AND m.seq < f.floor
       AND coalesce(f.seen, -1) = %(expect_seen)b::int8
)"""
        if prune
        else ""
    )
    return head + released + body + pruning + "\nSELECT version FROM cas\n"


def _checkpoint_write_statement(*, create: bool, lease: bool, prune: bool) -> Statement:
    """The named checkpoint write for one combination of flags: ``CHECKPOINT_CREATE`` or
    ``CHECKPOINT_CAS`` when it holds every CTE its kind can hold, else suffixed ``_LEASE``
    (lease, nothing to prune), ``_PRUNE`` (pruning, no lease) or ``_PLAIN`` (neither)."""
    base = "CHECKPOINT_CREATE" if create else "CHECKPOINT_CAS"
    full = lease and (prune or create)
    suffix = "" if full else "_LEASE" if lease else "_PRUNE" if prune else "_PLAIN"
    what = (
        "create a thread at version 1 unless it exists, with its first checkpoint and message rows"
        if create
        else "compare-and-swap a thread to its next version, insert the checkpoint and the new "
        "message rows"
    )
    if lease:
        what += ", under its run lease (fence checked, released when asked)"
    if prune:
        what += ", prune old versions and unreachable message rows"
    return Statement(
        base + suffix,
        what + ": one statement, one commit",
        "INSERT" if create else "UPDATE",
        _checkpoint_write(create=create, lease=lease, prune=prune),
    )


#: The checkpoint write for ``(creates the thread, under a run lease, prunes)``: the store
#: sends the variant holding only the CTEs a write needs (see the notes below).
CHECKPOINT_WRITES: dict[tuple[bool, bool, bool], Statement] = {
    (create, lease, prune): _checkpoint_write_statement(create=create, lease=lease, prune=prune)
    for create in (True, False)
    for lease in (True, False)
    for prune in ((False,) if create else (True, False))  # a new thread has nothing to prune
}
CHECKPOINT_CREATE = CHECKPOINT_WRITES[True, True, False]
CHECKPOINT_CREATE_PLAIN = CHECKPOINT_WRITES[True, False, False]
CHECKPOINT_CAS = CHECKPOINT_WRITES[False, True, True]
CHECKPOINT_CAS_LEASE = CHECKPOINT_WRITES[False, True, False]
CHECKPOINT_CAS_PRUNE = CHECKPOINT_WRITES[False, False, True]
CHECKPOINT_CAS_PLAIN = CHECKPOINT_WRITES[False, False, False]
# Notes on CHECKPOINT_CAS and its variants:
# * every data-modifying CTE joins ``cas``, so a lost CAS (zero rows) changes nothing;
# * every parameter is typed (integers as int8) and never NULL: "none" is ``NO_VERSION`` (-1),
#   so each statement has one parameter signature and is prepared once per connection;
# * ``prune_to`` is ``new_version - history_limit`` (-1: prune nothing); the kept versions are
#   ``(prune_to, new_version]``. The new version's ``min_seq`` is a parameter (its row is not
#   visible to sibling CTEs); the older kept versions' come from ``checkpoints``;
# * ``expect_seen`` guards the orphan sweep: the statement snapshot must see the newest older
#   kept version (``expected``), else (a writer that guessed a version still in flight) the sweep
#   is skipped this time rather than computed from an incomplete view (-1: expect no older
#   kept version);
# * the variants leave out what a write does not need: a write outside a run lease (``fence``
#   -1, ``release`` false) has nothing to check or release, a write with ``prune_to`` -1 nothing
#   to delete. Each variant does exactly what the full statement does with those values, but
#   the server initialises and runs only the plan nodes the write needs: on a 2-core VM the
#   executor start of the unused CTEs was about a fifth of the server's CPU per durable step.

WRITE_CONFLICT_PROBE = Statement(
    "WRITE_CONFLICT_PROBE",
    "error path of a lost write: is the thread the caller's, and at which version",
    "SELECT",
    """
SELECT owner = %(owner)b, version FROM {threads} WHERE thread_id = %(thread_id)b
""",
)

WRITE_OUTCOME_PROBE = Statement(
    "WRITE_OUTCOME_PROBE",
    "error path of a write whose answer was lost or whose CAS matched no row: is the thread the "
    "caller's, its version, and the stored values of the version the write would have created "
    "(they hold the write's token)",
    "SELECT",
    """
SELECT t.owner = %(owner)b, t.version, CASE WHEN t.owner = %(owner)b THEN c."values" END
  FROM {threads} AS t
  LEFT JOIN {checkpoints} AS c ON c.thread_id = %(thread_id)b AND c.version = %(version)b::int8
 WHERE t.thread_id = %(thread_id)b
""",
)

# -- checkpoint reads ---------------------------------------------------------------------------

READ_CHECKPOINT = Statement(
    "READ_CHECKPOINT",
    "the latest or a given kept version of an owned thread with its messages in list order",
    "SELECT",
    """
SELECT c.version, c."values", c.ranges, c.next_seq, c.status, c.created_at,
       coalesce(a.seqs, ARRAY[]::int8[]), coalesce(a.data, ARRAY[]::bytea[])
  FROM {threads} AS t
  JOIN {checkpoints} AS c
    ON c.thread_id = %(thread_id)b AND c.version = coalesce(%(version)b::int8, t.version)
 CROSS JOIN LATERAL (
       SELECT array_agg(m.seq) AS seqs, array_agg(m.data) AS data
         FROM generate_subscripts(c.ranges, 1) AS r(i)
         JOIN {messages} AS m
           ON m.thread_id = %(thread_id)b
          AND m.seq >= c.ranges[r.i] AND m.seq < c.ranges[r.i + 1]
        WHERE r.i %% 2 = 1) AS a
 WHERE t.thread_id = %(thread_id)b AND t.owner = %(owner)b
""",
)

#: ``READ_SINCE`` in pieces, so that ``LEASE_READ`` can gate its read on the lease: the ``t``
#: CTE (the thread's version), the ``c`` and ``k`` CTEs (its checkpoint row and how it compares
#: with the caller's copy), and the select list over ``c`` and ``k``.
_SINCE_T: LiteralString = """t AS (
    SELECT version FROM {threads} WHERE thread_id = %(thread_id)b AND owner = %(owner)b
)"""
_SINCE_CK: LiteralString = """c AS (
    SELECT c.version, c."values", c.ranges, c.next_seq, c.status, c.created_at
      FROM t JOIN {checkpoints} AS c ON c.thread_id = %(thread_id)b AND c.version = t.version
), k AS (
    SELECT CASE
             WHEN o.version = c.version THEN -1
             WHEN NOT %(delta_ok)b::bool OR cardinality(o.ranges) = 0 THEN 0
             WHEN c.ranges[1:cardinality(o.ranges) - 1] = o.ranges[1:cardinality(o.ranges) - 1]
              AND c.ranges[cardinality(o.ranges)] >= o.ranges[cardinality(o.ranges)]
             THEN cardinality(o.ranges) / 2
             ELSE 0
           END AS base,
           o.ranges[cardinality(o.ranges)] AS known_end
      FROM c
      LEFT JOIN {checkpoints} AS o
        ON o.thread_id = %(thread_id)b AND o.version = %(known_version)b::int8
       AND o.created_at = %(known_created_at)b::float8
)"""
_SINCE_COLUMNS: LiteralString = """c.version, CASE WHEN k.base < 0 THEN NULL ELSE c."values" END, c.ranges, c.next_seq,
       c.status, c.created_at, k.base,
       CASE WHEN k.base < 0 THEN NULL ELSE coalesce(a.seqs, ARRAY[]::int8[]) END,
       CASE WHEN k.base < 0 THEN NULL ELSE coalesce(a.data, ARRAY[]::bytea[]) END"""
#: The message rows ``READ_SINCE`` answers with (none when the copy is current), as two arrays
#: aggregated in one pass, so ``seqs[i]`` is the seq of ``data[i]``. They come in the scan's
#: order, not the list's: an ``ORDER BY`` here sorted every row with its data (a 10,000-message
#: thread: 4.8 MB, ~50 ms of the server's time, spilled to disk past ``work_mem``), while the
#: client puts them in list order from their seqs in well under a millisecond.
_SINCE_ROWS: LiteralString = """CROSS JOIN LATERAL (
       SELECT array_agg(m.seq) AS seqs, array_agg(m.data) AS data
         FROM generate_series(greatest(k.base, 1), cardinality(c.ranges) / 2) AS p(i)
         JOIN {messages} AS m
           ON m.thread_id = %(thread_id)b
          AND m.seq >= CASE WHEN p.i = k.base THEN k.known_end
                            ELSE c.ranges[2 * p.i - 1] END
          AND m.seq < c.ranges[2 * p.i]
        WHERE k.base >= 0) AS a"""

READ_SINCE = Statement(
    "READ_SINCE",
    "the first read of a run: the latest version of an owned thread, answered against the copy "
    "a cache holds (version v): only the version when the copy is current, the checkpoint row "
    "and the message rows the copy lacks when the thread only appended since v, the full "
    "message list otherwise",
    "SELECT",
    "\nWITH "
    + _SINCE_T
    + ", "
    + _SINCE_CK
    + "\nSELECT "
    + _SINCE_COLUMNS
    + "\n  FROM c CROSS JOIN k "
    + _SINCE_ROWS
    + "\n",
)
# Notes on READ_SINCE (the statement a run's first read sends when a cache holds a copy):
# * the cached copy is named by its version and creation time, so a version number reused after
#   the thread was deleted and created again never matches;
# * ``base`` says how to read the answer: -1, the copy is current (no values, no messages);
#   m > 0, the thread only appended since the copy (its first m - 1 ranges are unchanged, range
#   m extends the copy's last one): the messages are those after the copy's, so the full list
#   is the copy's messages followed by them; 0, the full message list (the copy's version was
#   pruned, or its ranges changed otherwise, or ``delta_ok`` is false: the copy has no blobs);
# * message rows are immutable (a seq is never reused while the thread exists), so a copy whose
#   version row is still kept has exactly the messages of its ranges.

LEASE_READ = Statement(
    "LEASE_READ",
    "the first read of a run that needs the thread's run lease: one acquisition attempt "
    "(granted fence, forbidden, expiry, waiters ahead, the version the last release left) and, "
    "only when granted, READ_SINCE's answer: one round trip for both",
    "INSERT",
    "\nWITH "
    + _lease_sql.ACQUIRE_CTES
    + """, lease (fence, forbidden, expires_in_s, ahead, settled_version) AS (
    SELECT """
    + _lease_sql.ACQUIRE_COLUMNS
    + """,
           (SELECT settled_version FROM took)
      FROM clock
), t AS (
    SELECT version FROM {threads}
     WHERE thread_id = %(thread_id)b AND owner = %(owner)b AND EXISTS (SELECT 1 FROM took)
), """
    + _SINCE_CK
    + "\nSELECT lease.*, "
    + _SINCE_COLUMNS
    + "\n  FROM lease LEFT JOIN (c CROSS JOIN k "
    + _SINCE_ROWS
    + ") ON true\n",
)
# Notes on LEASE_READ:
# * the answer is always one row: the five lease columns, then READ_SINCE's nine (all NULL when
#   the lease was refused, or granted on a thread that does not exist yet);
# * the read CTEs see the statement's snapshot, taken before ``took`` may wait for the previous
#   holder's last write (its row lock on ``thread_leases``): the fifth column
#   (``settled_version``, set by that write's release) tells the caller to read again when it
#   is newer than the version read, or -1 (the grant took over a lapsed holder).

READ_CHECKPOINT_META = Statement(
    "READ_CHECKPOINT_META",
    "the latest or a given kept version of an owned thread, without its messages",
    "SELECT",
    """
SELECT c.version, c."values", c.ranges, c.next_seq, c.status, c.created_at, NULL::int8[],
       NULL::bytea[]
  FROM {threads} AS t
  JOIN {checkpoints} AS c
    ON c.thread_id = %(thread_id)b AND c.version = coalesce(%(version)b::int8, t.version)
 WHERE t.thread_id = %(thread_id)b AND t.owner = %(owner)b
""",
)

CURRENT_VERSION = Statement(
    "CURRENT_VERSION",
    "the latest version of an owned thread",
    "SELECT",
    """
SELECT version FROM {threads} WHERE thread_id = %(thread_id)b AND owner = %(owner)b
""",
)

HISTORY_CHECKPOINTS = Statement(
    "HISTORY_CHECKPOINTS",
    "kept versions of an owned thread, newest first, below an optional version, limited",
    "SELECT",
    """
SELECT c.version, c."values", c.ranges, c.next_seq, c.status, c.created_at
  FROM {threads} AS t
  JOIN {checkpoints} AS c ON c.thread_id = %(thread_id)b
 WHERE t.thread_id = %(thread_id)b AND t.owner = %(owner)b
   AND (%(before)b::int8 IS NULL OR c.version < %(before)b::int8)
 ORDER BY c.version DESC
 LIMIT %(limit)b::int8
""",
)

HISTORY_MESSAGES = Statement(
    "HISTORY_MESSAGES",
    "the message rows of an owned thread inside a set of disjoint seq ranges",
    "SELECT",
    """
SELECT m.seq, m.data
  FROM unnest(%(starts)b::int8[], %(ends)b::int8[]) AS r(s, e)
  JOIN {messages} AS m ON m.thread_id = %(thread_id)b AND m.seq >= r.s AND m.seq < r.e
 WHERE EXISTS (SELECT 1 FROM {threads} AS t
                WHERE t.thread_id = %(thread_id)b AND t.owner = %(owner)b)
""",
)

# -- threads ------------------------------------------------------------------------------------

LIST_THREADS = Statement(
    "LIST_THREADS",
    "threads of one owner, most recently updated first, paginated",
    "SELECT",
    """
SELECT thread_id, owner, version, status, created_at, updated_at, metadata
  FROM {threads}
 WHERE owner = %(owner)b
 ORDER BY updated_at DESC, thread_id
 LIMIT %(limit)b::int8 OFFSET %(offset)b::int8
""",
)

LIST_ALL_THREADS = Statement(
    "LIST_ALL_THREADS",
    "every thread ('*' caller), most recently updated first, paginated",
    "SELECT",
    """
SELECT thread_id, owner, version, status, created_at, updated_at, metadata
  FROM {threads}
 ORDER BY updated_at DESC, thread_id
 LIMIT %(limit)b::int8 OFFSET %(offset)b::int8
""",
)

DELETE_THREAD = Statement(
    "DELETE_THREAD",
    "delete an owned thread with its versions, message rows, ledger rows and stop requests; "
    "say whether another user owns it",
    "DELETE",
    """
WITH gone AS (
    DELETE FROM {threads} WHERE thread_id = %(thread_id)b AND owner = %(owner)b
 RETURNING thread_id
), gone_checkpoints AS (
    DELETE FROM {checkpoints} AS c USING gone WHERE c.thread_id = %(thread_id)b
), gone_messages AS (
    DELETE FROM {messages} AS m USING gone WHERE m.thread_id = %(thread_id)b
), gone_ledger AS (
    DELETE FROM {tool_executions} AS e USING gone WHERE e.thread_id = %(thread_id)b
), gone_stops AS (
    DELETE FROM {stop_requests} AS s USING gone WHERE s.thread_id = %(thread_id)b
)
SELECT (SELECT count(*) FROM gone),
       EXISTS (SELECT 1 FROM {threads}
                WHERE thread_id = %(thread_id)b AND owner <> %(owner)b)
""",
)

SET_METADATA = Statement(
    "SET_METADATA",
    "replace the application metadata of an owned thread; say whether the thread is the "
    "caller's (NULL: missing)",
    "UPDATE",
    """
WITH changed AS (
    UPDATE {threads} SET metadata = %(metadata)b
     WHERE thread_id = %(thread_id)b AND owner = %(owner)b
 RETURNING 1
)
SELECT (SELECT count(*) FROM changed),
       (SELECT owner = %(owner)b FROM {threads} WHERE thread_id = %(thread_id)b)
""",
)

SET_STOP = Statement(
    "SET_STOP",
    "record the caller's stop request for a thread (kept at the newest request time; also "
    "before the thread's first checkpoint) unless another user owns it; say whether one does",
    "INSERT",
    """
WITH foreign_owner AS (
    SELECT 1 FROM {threads} WHERE thread_id = %(thread_id)b AND owner <> %(owner)b
), recorded AS (
    INSERT INTO {stop_requests} AS s (thread_id, owner, requested_at)
    SELECT %(thread_id)b, %(owner)b, %(requested_at)b
     WHERE NOT EXISTS (SELECT 1 FROM foreign_owner)
        ON CONFLICT (thread_id, owner)
        DO UPDATE SET requested_at = greatest(s.requested_at, excluded.requested_at)
)
SELECT EXISTS (SELECT 1 FROM foreign_owner)
""",
)

CLEAR_STOP = Statement(
    "CLEAR_STOP",
    "withdraw the caller's stop request for a thread unless another user owns it; say whether "
    "one does",
    "DELETE",
    """
WITH foreign_owner AS (
    SELECT 1 FROM {threads} WHERE thread_id = %(thread_id)b AND owner <> %(owner)b
), cleared AS (
    DELETE FROM {stop_requests}
     WHERE thread_id = %(thread_id)b AND owner = %(owner)b
       AND NOT EXISTS (SELECT 1 FROM foreign_owner)
)
SELECT EXISTS (SELECT 1 FROM foreign_owner)
""",
)

GET_STOP = Statement(
    "GET_STOP",
    "the time of the caller's stop request for a thread no other user owns (no row: none)",
    "SELECT",
    """
SELECT s.requested_at FROM {stop_requests} AS s
 WHERE s.thread_id = %(thread_id)b AND s.owner = %(owner)b
   AND NOT EXISTS (SELECT 1 FROM {threads} AS t
                    WHERE t.thread_id = %(thread_id)b AND t.owner <> %(owner)b)
""",
)

# -- run leases (templates in tenxgraph.storage._lease_sql) ------------------------------------

LEASE_ACQUIRE = Statement(
    "LEASE_ACQUIRE",
    "one attempt to take a thread's run lease (or keep the caller's place in its queue); say "
    "the granted fence, whether another user owns the thread, and when the holder's lease "
    "lapses",
    "INSERT",
    _lease_sql.ACQUIRE,
)

LEASE_PEEK = Statement(
    "LEASE_PEEK",
    "a queued run's read-only poll: when a thread's run lease lapses and how many live waiters "
    "are ahead of the caller",
    "SELECT",
    _lease_sql.PEEK,
)

LEASE_RENEW = Statement(
    "LEASE_RENEW",
    "extend the holder's run lease (no row: another run took it)",
    "UPDATE",
    _lease_sql.RENEW,
)

LEASE_RELEASE = Statement(
    "LEASE_RELEASE",
    "give a run lease up and leave the thread's queue",
    "UPDATE",
    _lease_sql.RELEASE,
)

# -- tool ledger --------------------------------------------------------------------------------

LEDGER_PUT = Statement(
    "LEDGER_PUT",
    "record a tool execution on an owned thread unless its call is recorded; say whether it "
    "was inserted and whether the thread is the caller's (NULL: missing)",
    "INSERT",
    """
WITH guard AS (
    SELECT owner FROM {threads} WHERE thread_id = %(thread_id)b
), ins AS (
    INSERT INTO {tool_executions}
           (thread_id, call_key, tool_call_id, tool_name, result, created_at)
    SELECT %(thread_id)b, %(call_key)b, %(tool_call_id)b, %(tool_name)b, %(result)b,
           %(created_at)b
      FROM guard
     WHERE guard.owner = %(owner)b
        ON CONFLICT (thread_id, call_key) DO NOTHING
 RETURNING 1
)
SELECT (SELECT count(*) FROM ins), (SELECT owner = %(owner)b FROM guard)
""",
)

LEDGER_GET = Statement(
    "LEDGER_GET",
    "a recorded tool execution of an owned thread; say whether the thread is the caller's",
    "SELECT",
    """
SELECT t.owner = %(owner)b, e.tool_call_id, e.tool_name, e.result, e.created_at
  FROM {threads} AS t
  LEFT JOIN {tool_executions} AS e
    ON e.thread_id = %(thread_id)b AND e.call_key = %(call_key)b AND t.owner = %(owner)b
 WHERE t.thread_id = %(thread_id)b
""",
)

LEDGER_COUNT = Statement(
    "LEDGER_COUNT",
    "number of ledger rows of an owned thread; say whether the thread is the caller's",
    "SELECT",
    """
SELECT t.owner = %(owner)b,
       (SELECT count(*) FROM {tool_executions} AS e
         WHERE e.thread_id = %(thread_id)b AND t.owner = %(owner)b)
  FROM {threads} AS t
 WHERE t.thread_id = %(thread_id)b
""",
)

# -- time travel (tenxgraph.storage._fork) ------------------------------------------------------

KEPT_VERSIONS = Statement(
    "KEPT_VERSIONS",
    "the oldest kept and the latest version of an owned thread (no row: missing or not owned)",
    "SELECT",
    """
SELECT min(c.version), max(c.version)
  FROM {threads} AS t
  JOIN {checkpoints} AS c ON c.thread_id = %(thread_id)b
 WHERE t.thread_id = %(thread_id)b AND t.owner = %(owner)b
 GROUP BY t.thread_id
""",
)

FORK = Statement(
    "FORK",
    "fork a kept version of an owned thread into a new thread of the same owner: its thread "
    "row and version 1, the source's message rows of that version copied by one INSERT ... "
    "SELECT under the same seqs, the fork's own new rows, the source's ledger rows; say whether "
    "the source version was found, whether the fork was created, the rows copied, and the "
    "existing target's owner check and version",
    "INSERT",
    """
WITH src AS (
    SELECT c.version
      FROM {threads} AS t
      JOIN {checkpoints} AS c
        ON c.thread_id = %(src_thread_id)b AND c.version = %(src_version)b::int8
     WHERE t.thread_id = %(src_thread_id)b AND t.owner = %(owner)b
       FOR SHARE OF c
), created AS (
    INSERT INTO {threads} (thread_id, owner, version, status, created_at, updated_at, metadata)
    SELECT %(thread_id)b, %(owner)b, 1, %(status)b, %(created_at)b, %(created_at)b,
           %(metadata)b
      FROM src
        ON CONFLICT (thread_id) DO NOTHING
 RETURNING version
), new_checkpoint AS (
    INSERT INTO {checkpoints}
           (thread_id, version, "values", ranges, min_seq, next_seq, status, created_at)
    SELECT %(thread_id)b, 1, %(values)b, %(ranges)b::int8[], %(min_seq)b, %(next_seq)b,
           %(status)b, %(created_at)b
      FROM created
), copied AS (
    INSERT INTO {messages} (thread_id, seq, data)
    SELECT %(thread_id)b, m.seq, m.data
      FROM created
     CROSS JOIN unnest(%(copy_starts)b::int8[], %(copy_ends)b::int8[]) AS r(s, e)
      JOIN {messages} AS m
        ON m.thread_id = %(src_thread_id)b AND m.seq >= r.s AND m.seq < r.e
 RETURNING 1
), new_messages AS (
    INSERT INTO {messages} (thread_id, seq, data)
    SELECT %(thread_id)b, m.seq, m.data
      FROM created, unnest(%(seqs)b::int8[], %(datas)b::bytea[]) AS m(seq, data)
), ledger AS (
    INSERT INTO {tool_executions}
           (thread_id, call_key, tool_call_id, tool_name, result, created_at)
    SELECT %(thread_id)b, e.call_key, e.tool_call_id, e.tool_name, e.result, e.created_at
      FROM created CROSS JOIN {tool_executions} AS e
     WHERE e.thread_id = %(src_thread_id)b
)
SELECT (SELECT count(*) FROM src), (SELECT count(*) FROM created),
       (SELECT count(*) FROM copied),
       (SELECT owner = %(owner)b FROM {threads} WHERE thread_id = %(thread_id)b),
       (SELECT version FROM {threads} WHERE thread_id = %(thread_id)b)
""",
)


# -- rotate-keys (tenxgraph.storage._rotate) ------------------------------------------------------
ROTATE_SCAN_CHECKPOINTS = Statement(
    "ROTATE_SCAN_CHECKPOINTS",
    "rotate-keys: a page of checkpoints rows after a (thread_id, version) cursor with their owner, "
    "only those not sealed under the given key header unless every row is asked for",
    "SELECT",
    """
SELECT x.thread_id, t.owner, x.version, x."values"
  FROM {checkpoints} AS x
  JOIN {threads} AS t ON t.thread_id = x.thread_id
 WHERE (x.thread_id, x.version) > (%(after_thread)b, %(after_pos)b::int8)
   AND x.created_at < %(older_than)b
   AND (%(every)b OR substring(x."values" from 1 for %(hlen)b::int4) <> %(header)b)
 ORDER BY x.thread_id, x.version
 LIMIT %(limit)b
""",
)

ROTATE_SCAN_MESSAGES = Statement(
    "ROTATE_SCAN_MESSAGES",
    "rotate-keys: a page of messages rows after a (thread_id, seq) cursor with their owner, "
    "only those not sealed under the given key header unless every row is asked for",
    "SELECT",
    """
SELECT x.thread_id, t.owner, x.seq, x.data
  FROM {messages} AS x
  JOIN {threads} AS t ON t.thread_id = x.thread_id
 WHERE (x.thread_id, x.seq) > (%(after_thread)b, %(after_pos)b::int8)
   AND (%(every)b OR substring(x.data from 1 for %(hlen)b::int4) <> %(header)b)
 ORDER BY x.thread_id, x.seq
 LIMIT %(limit)b
""",
)

ROTATE_SCAN_LEDGER = Statement(
    "ROTATE_SCAN_LEDGER",
    "rotate-keys: a page of tool_executions rows after a (thread_id, call_key) cursor with their owner, "
    "only those not sealed under the given key header unless every row is asked for",
    "SELECT",
    """
SELECT x.thread_id, t.owner, x.call_key, x.result
  FROM {tool_executions} AS x
  JOIN {threads} AS t ON t.thread_id = x.thread_id
 WHERE (x.thread_id, x.call_key) > (%(after_thread)b, %(after_pos)b::bytea)
   AND (%(every)b OR substring(x.result from 1 for %(hlen)b::int4) <> %(header)b)
 ORDER BY x.thread_id, x.call_key
 LIMIT %(limit)b
""",
)


def _rotate_swap(
    name: LiteralString,
    table: LiteralString,
    position: LiteralString,
    position_type: LiteralString,
    column: LiteralString,
    what: LiteralString,
) -> Statement:
    """rotate-keys' conditional swap of one sealed column: each ``(thread_id, position, old,
    new)`` of a batch replaces the payload only while it still holds the bytes read, skipping
    rows another transaction holds (never waits, so no lock cycle with the writers named by
    ``what``); keys, versions and statuses are untouched."""
    return Statement(
        name,
        "rotate-keys: replace the sealed "
        + table
        + " "
        + column
        + " payloads of a batch whose bytes are still the ones read, skipping rows another "
        "transaction holds (never waits: no lock cycle with "
        + what
        + "); the versions and the CAS are untouched",
        "UPDATE",
        """
WITH todo AS (
    SELECT *
      FROM unnest(%(thread_ids)b::text[], %(positions)b::"""
        + position_type
        + """[], %(olds)b::bytea[],
                  %(news)b::bytea[]) AS u(thread_id, pos, old, new)
), locked AS (
    SELECT x.thread_id, x."""
        + position
        + """, todo.new
      FROM {"""
        + table
        + """} AS x
      JOIN todo ON x.thread_id = todo.thread_id AND x."""
        + position
        + """ = todo.pos AND x."""
        + column
        + """ = todo.old
       FOR UPDATE OF x SKIP LOCKED
)
UPDATE {"""
        + table
        + """} AS x SET """
        + column
        + """ = locked.new
  FROM locked
 WHERE x.thread_id = locked.thread_id AND x."""
        + position
        + """ = locked."""
        + position
        + """
RETURNING 1
""",
    )


_WRITERS: LiteralString = "a checkpoint write or a prune"
ROTATE_SWAP_CHECKPOINTS = _rotate_swap(
    "ROTATE_SWAP_CHECKPOINTS", "checkpoints", "version", "int8", '"values"', _WRITERS
)
ROTATE_SWAP_MESSAGES = _rotate_swap(
    "ROTATE_SWAP_MESSAGES", "messages", "seq", "int8", "data", _WRITERS
)
ROTATE_SWAP_LEDGER = _rotate_swap(
    "ROTATE_SWAP_LEDGER", "tool_executions", "call_key", "bytea", "result", _WRITERS
)


def _rotate_runs_scan(column: LiteralString, name: LiteralString) -> Statement:
    """rotate-keys' page of a ``runs`` payload column (``input`` or ``output``; a NULL output,
    a run not done yet, is no row) after a ``(thread_id, run_id)`` cursor, with the run's own
    owner (a pending run's thread may have no ``threads`` row yet)."""
    return Statement(
        name,
        "rotate-keys: a page of runs rows after a (thread_id, run_id) cursor with their owner and "
        "their " + column + " payload (none when NULL), only those not sealed under the given "
        "key header unless every row is asked for",
        "SELECT",
        """
SELECT x.thread_id, x.owner, x.run_id, x."""
        + column
        + """
  FROM {runs} AS x
 WHERE (x.thread_id, x.run_id) > (%(after_thread)b, %(after_pos)b::text)
   AND x."""
        + column
        + """ IS NOT NULL
   AND (%(every)b OR substring(x."""
        + column
        + """ from 1 for %(hlen)b::int4) <> %(header)b)
 ORDER BY x.thread_id, x.run_id
 LIMIT %(limit)b
""",
    )


ROTATE_SCAN_RUN_INPUTS = _rotate_runs_scan("input", "ROTATE_SCAN_RUN_INPUTS")
ROTATE_SCAN_RUN_OUTPUTS = _rotate_runs_scan("output", "ROTATE_SCAN_RUN_OUTPUTS")
_WORKERS: LiteralString = "a worker moving the run"
ROTATE_SWAP_RUN_INPUTS = _rotate_swap(
    "ROTATE_SWAP_RUN_INPUTS", "runs", "run_id", "text", "input", _WORKERS
)
ROTATE_SWAP_RUN_OUTPUTS = _rotate_swap(
    "ROTATE_SWAP_RUN_OUTPUTS", "runs", "run_id", "text", "output", _WORKERS
)


# -- setup and migrations -----------------------------------------------------------------------

SCHEMA_EXISTS = Statement(
    "SCHEMA_EXISTS",
    "whether the configured schema exists",
    "SELECT",
    """
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %(schema)b)
""",
)

TABLE_EXISTS = Statement(
    "TABLE_EXISTS",
    "whether a table (given as a quoted, schema-qualified name) exists",
    "SELECT",
    """
SELECT to_regclass(%(qualified)b) IS NOT NULL
""",
)

CREATE_SCHEMA = Statement(
    "CREATE_SCHEMA",
    "create the configured schema",
    "CREATE",
    """
CREATE SCHEMA IF NOT EXISTS {schema}
""",
)

CREATE_MIGRATIONS_TABLE = Statement(
    "CREATE_MIGRATIONS_TABLE",
    "create the table recording applied schema steps",
    "CREATE",
    """
CREATE TABLE IF NOT EXISTS {migrations} (
    version integer PRIMARY KEY,
    summary text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
""",
)

MIGRATION_LOCK = Statement(
    "MIGRATION_LOCK",
    "serialize schema setup across processes until the end of the transaction",
    "SELECT",
    """
SELECT pg_advisory_xact_lock(%(lock_key)b::int8)
""",
)

BACKEND_PID = Statement(
    "BACKEND_PID",
    "the server process id serving this connection (compared with the one given at startup "
    "to detect a pooler)",
    "SELECT",
    """
SELECT pg_backend_pid()
""",
)

TABLE_LAYOUT = Statement(
    "TABLE_LAYOUT",
    "whether a table (quoted, schema-qualified name) is partitioned, and into how many "
    "partitions (no row: the table does not exist)",
    "SELECT",
    """
SELECT c.relkind = 'p',
       (SELECT count(*) FROM pg_catalog.pg_inherits AS i WHERE i.inhparent = c.oid)
  FROM pg_catalog.pg_class AS c
 WHERE c.oid = to_regclass(%(qualified)b)
""",
)

#: The layout clause of a thread-keyed table in the partitioned layout (see
#: :func:`tenxgraph.storage._migrations.render_step`).
PARTITION_BY_THREAD = "PARTITION BY HASH (thread_id)"

#: DDL of one hash partition: ``{partition}`` and ``{parent}`` are identifiers, ``{modulus}``
#: and ``{remainder}`` integer literals (DDL takes no parameters), ``{storage}`` a storage clause.
CREATE_PARTITION = """
CREATE TABLE {partition} PARTITION OF {parent}
    FOR VALUES WITH (MODULUS {modulus}, REMAINDER {remainder}) {storage}
"""

CACHE_MAC_KEY = Statement(
    "CACHE_MAC_KEY",
    "the key of the MACs on shared cache entries (created with the schema, never sent to Redis)",
    "SELECT",
    """
SELECT mac_key FROM {cache_keys} WHERE id = 1
""",
)

MIGRATION_VERSION = Statement(
    "MIGRATION_VERSION",
    "the schema version: the highest applied step (0: none)",
    "SELECT",
    """
SELECT coalesce(max(version), 0) FROM {migrations}
""",
)

MIGRATION_RECORD = Statement(
    "MIGRATION_RECORD",
    "record an applied schema step",
    "INSERT",
    """
INSERT INTO {migrations} (version, summary) VALUES (%(version)b, %(summary)b)
""",
)

# -- submitted runs (schema version 7; tenxgraph.core._recovery) -------------------------------

#: Columns of a run row, in :class:`tenxgraph.run_records.RunRecord` field order.
_RUN_COLUMNS = (
    "run_id, thread_id, owner, status, input, config, attempts, crashes, holder, worker, "
    "last_error, output, created_at, updated_at"
)

RUN_INSERT = Statement(
    "RUN_INSERT",
    "record a submitted run (kept as is when its id is already recorded) unless another user "
    "owns the thread, and notify the workers' channel; say whether another user owns it and "
    "whether the row is new",
    "INSERT",
    """
WITH foreign_owner AS (
    SELECT 1 FROM {threads} WHERE thread_id = %(thread_id)b AND owner <> %(owner)b
    UNION ALL
    SELECT 1 FROM {runs} WHERE thread_id = %(thread_id)b AND owner <> %(owner)b
), inserted AS (
    INSERT INTO {runs} (thread_id, run_id, owner, status, input, config, created_at, updated_at)
    SELECT %(thread_id)b, %(run_id)b, %(owner)b, 'pending', %(input)b, %(config)b,
           %(now)b::float8, %(now)b::float8
     WHERE NOT EXISTS (SELECT 1 FROM foreign_owner)
        ON CONFLICT (thread_id, run_id) DO NOTHING
 RETURNING run_id
)
SELECT EXISTS (SELECT 1 FROM foreign_owner),
       (SELECT count(*) FROM inserted),
       (SELECT count(pg_notify(%(channel)b, i.run_id)) FROM inserted AS i)
""",
)

RUN_GET = Statement(
    "RUN_GET",
    "one submitted run of the caller (no row: none, or another user's)",
    "SELECT",
    """
SELECT """
    + _RUN_COLUMNS
    + """ FROM {runs}
 WHERE thread_id = %(thread_id)b AND run_id = %(run_id)b AND owner = %(owner)b
""",
)

RUN_LIST = Statement(
    "RUN_LIST",
    "submitted runs of an owner ('': all), optionally of one status and one thread, newest first",
    "SELECT",
    """
SELECT """
    + _RUN_COLUMNS
    + """ FROM {runs}
 WHERE (%(owner)b = '' OR owner = %(owner)b)
   AND (%(status)b = '' OR status = %(status)b)
   AND (%(only_thread)b = '' OR thread_id = %(only_thread)b)
 ORDER BY created_at DESC
 LIMIT %(limit)b::int8
""",
)

RUN_OPEN = Statement(
    "RUN_OPEN",
    "the open runs (pending or running) of every owner, oldest first (a worker's sweep)",
    "SELECT",
    """
SELECT """
    + _RUN_COLUMNS
    + """ FROM {runs}
 WHERE status IN ('pending', 'running')
 ORDER BY created_at
 LIMIT %(limit)b::int8
""",
)

RUN_UPDATE = Statement(
    "RUN_UPDATE",
    "move a run to its next state when it is still in the state the caller read (status and "
    "attempts: a compare-and-swap), notifying the workers' channel when asked; say whether it "
    "moved",
    "UPDATE",
    """
WITH moved AS (
    UPDATE {runs}
       SET status = %(status)b, attempts = %(attempts)b::int4, crashes = %(crashes)b::int4,
           holder = %(holder)b, worker = %(worker)b, last_error = %(last_error)b,
           output = %(output)b::bytea, updated_at = %(now)b::float8
     WHERE thread_id = %(thread_id)b AND run_id = %(run_id)b
       AND status = %(expect_status)b AND attempts = %(expect_attempts)b::int4
 RETURNING run_id
)
SELECT (SELECT count(*) FROM moved),
       (SELECT count(pg_notify(%(channel)b, m.run_id)) FROM moved AS m WHERE %(notify)b::bool)
""",
)

# -- erasure and retention (schema version 10; tenxgraph.storage.retention) ---------------------

#: The deletions of every row of a set of threads (``{victims}``: a CTE of ``thread_id`` s),
#: in :data:`tenxgraph.storage.retention.ERASE_TABLES` order after ``threads``; the owner-wide
#: clause (``{owner_wide}``) also takes the rows an owner holds on threads that are not theirs.
_ERASE_CHILDREN: LiteralString = """
, d_checkpoints AS (
    DELETE FROM {checkpoints} AS x USING victims AS v WHERE x.thread_id = v.thread_id
 RETURNING 1
), d_messages AS (
    DELETE FROM {messages} AS x USING victims AS v WHERE x.thread_id = v.thread_id
 RETURNING 1
), d_tool_executions AS (
    DELETE FROM {tool_executions} AS x USING victims AS v WHERE x.thread_id = v.thread_id
 RETURNING 1
), d_stop_requests AS (
    DELETE FROM {stop_requests} AS x
     WHERE x.thread_id IN (SELECT thread_id FROM victims)
        OR (%(by_owner)b::bool AND x.owner = %(owner)b)
 RETURNING 1
), d_thread_leases AS (
    DELETE FROM {thread_leases} AS x
     WHERE x.thread_id IN (SELECT thread_id FROM victims)
        OR (%(by_owner)b::bool AND x.owner = %(owner)b)
 RETURNING 1
), d_lease_waiters AS (
    DELETE FROM {lease_waiters} AS x USING victims AS v WHERE x.thread_id = v.thread_id
 RETURNING 1
), d_runs AS (
    DELETE FROM {runs} AS x
     WHERE x.thread_id IN (SELECT thread_id FROM victims)
        OR (%(by_owner)b::bool AND x.owner = %(owner)b)
 RETURNING 1
)
"""

#: The per-table counts of :data:`_ERASE_CHILDREN`, as select-list items.
_ERASE_COUNTS: LiteralString = """
       (SELECT count(*) FROM gone),
       (SELECT count(*) FROM d_checkpoints),
       (SELECT count(*) FROM d_messages),
       (SELECT count(*) FROM d_tool_executions),
       (SELECT count(*) FROM d_stop_requests),
       (SELECT count(*) FROM d_thread_leases),
       (SELECT count(*) FROM d_lease_waiters),
       (SELECT count(*) FROM d_runs)
"""

ERASE_OWNER = Statement(
    "ERASE_OWNER",
    "delete every row of an owner's threads (found by owner in threads, runs, stop requests "
    "and leases when by_owner, plus the given thread ids) and every row the owner holds "
    "elsewhere; return the thread ids and the rows deleted per table",
    "DELETE",
    """
WITH cand AS (
    SELECT thread_id FROM {threads} WHERE %(by_owner)b::bool AND owner = %(owner)b
    UNION SELECT thread_id FROM {runs} WHERE %(by_owner)b::bool AND owner = %(owner)b
    UNION SELECT thread_id FROM {stop_requests} WHERE %(by_owner)b::bool AND owner = %(owner)b
    UNION SELECT thread_id FROM {thread_leases} WHERE %(by_owner)b::bool AND owner = %(owner)b
    UNION SELECT unnest(%(thread_ids)b::text[])
), gone AS (
    DELETE FROM {threads} AS t USING cand AS c
     WHERE t.thread_id = c.thread_id AND t.owner = %(owner)b
 RETURNING t.thread_id
), victims AS (
    SELECT thread_id FROM gone
    UNION
    SELECT c.thread_id FROM cand AS c
     WHERE NOT EXISTS (SELECT 1 FROM {threads} AS t WHERE t.thread_id = c.thread_id)
)"""
    + _ERASE_CHILDREN
    + """SELECT ARRAY(SELECT thread_id FROM victims ORDER BY 1),"""
    + _ERASE_COUNTS,
)

SWEEP_IDLE = Statement(
    "SWEEP_IDLE",
    "delete up to limit threads idle longer than their TTL (own ttl_s, else the default) "
    "that hold no live run lease and no open run, with every row of them; return their ids, "
    "owners and the rows deleted per table",
    "DELETE",
    """
WITH clock AS (
    SELECT extract(epoch FROM statement_timestamp())::float8 AS now
), idle AS (
    SELECT t.thread_id FROM {threads} AS t
     WHERE t.updated_at < %(now)b::float8 - coalesce(t.ttl_s, %(ttl_s)b::float8)
       AND NOT EXISTS (SELECT 1 FROM {thread_leases} AS l, clock
                        WHERE l.thread_id = t.thread_id AND l.holder <> ''
                          AND l.expires_at > clock.now)
       AND NOT EXISTS (SELECT 1 FROM {runs} AS r
                        WHERE r.thread_id = t.thread_id AND r.status IN ('pending', 'running'))
     ORDER BY t.updated_at
     LIMIT %(limit)b::int8
       FOR UPDATE OF t SKIP LOCKED
), gone AS (
    DELETE FROM {threads} AS t USING idle AS i WHERE t.thread_id = i.thread_id
 RETURNING t.thread_id, t.owner
), victims AS (
    SELECT thread_id FROM gone
)"""
    + _ERASE_CHILDREN
    + """SELECT ARRAY(SELECT thread_id FROM gone ORDER BY 1),
       ARRAY(SELECT owner FROM gone ORDER BY thread_id),"""
    + _ERASE_COUNTS,
)

SET_THREAD_TTL = Statement(
    "SET_THREAD_TTL",
    "set (or, NULL, clear) the retention override of an owned thread; say whether the thread "
    "is the caller's (NULL: missing)",
    "UPDATE",
    """
WITH changed AS (
    UPDATE {threads} SET ttl_s = %(ttl_s)b::float8
     WHERE thread_id = %(thread_id)b AND owner = %(owner)b
 RETURNING 1
)
SELECT (SELECT count(*) FROM changed),
       (SELECT owner = %(owner)b FROM {threads} WHERE thread_id = %(thread_id)b)
""",
)

GET_THREAD_TTL = Statement(
    "GET_THREAD_TTL",
    "the retention override of an owned thread (no row: missing or not owned)",
    "SELECT",
    """
SELECT ttl_s FROM {threads} WHERE thread_id = %(thread_id)b AND owner = %(owner)b
""",
)

#: Every statement above, by name.
ALL_STATEMENTS: dict[str, Statement] = {
    s.name: s
    for s in (
        CACHE_MAC_KEY,
        ROTATE_SCAN_CHECKPOINTS,
        ROTATE_SCAN_MESSAGES,
        ROTATE_SCAN_LEDGER,
        ROTATE_SWAP_CHECKPOINTS,
        ROTATE_SWAP_MESSAGES,
        ROTATE_SWAP_LEDGER,
        ROTATE_SCAN_RUN_INPUTS,
        ROTATE_SCAN_RUN_OUTPUTS,
        ROTATE_SWAP_RUN_INPUTS,
        ROTATE_SWAP_RUN_OUTPUTS,
        CHECKPOINT_CAS,
        CHECKPOINT_CAS_PRUNE,
        CHECKPOINT_CAS_LEASE,
        CHECKPOINT_CAS_PLAIN,
        CHECKPOINT_CREATE,
        CHECKPOINT_CREATE_PLAIN,
        WRITE_CONFLICT_PROBE,
        WRITE_OUTCOME_PROBE,
        READ_CHECKPOINT,
        READ_CHECKPOINT_META,
        READ_SINCE,
        LEASE_READ,
        CURRENT_VERSION,
        HISTORY_CHECKPOINTS,
        HISTORY_MESSAGES,
        LIST_THREADS,
        LIST_ALL_THREADS,
        DELETE_THREAD,
        SET_METADATA,
        SET_STOP,
        CLEAR_STOP,
        GET_STOP,
        LEASE_ACQUIRE,
        LEASE_PEEK,
        LEASE_RENEW,
        LEASE_RELEASE,
        LEDGER_PUT,
        LEDGER_GET,
        LEDGER_COUNT,
        KEPT_VERSIONS,
        FORK,
        RUN_INSERT,
        RUN_GET,
        RUN_LIST,
        RUN_OPEN,
        RUN_UPDATE,
        ERASE_OWNER,
        SWEEP_IDLE,
        SET_THREAD_TTL,
        GET_THREAD_TTL,
        SCHEMA_EXISTS,
        TABLE_EXISTS,
        TABLE_LAYOUT,
        BACKEND_PID,
        CREATE_SCHEMA,
        CREATE_MIGRATIONS_TABLE,
        MIGRATION_LOCK,
        MIGRATION_VERSION,
        MIGRATION_RECORD,
    )
}

#: Unprefixed table and index names, mapped from template placeholders.
_TABLES = {
    "threads": "threads",
    "checkpoints": "checkpoints",
    "messages": "messages",
    "tool_executions": "tool_executions",
    "stop_requests": "stop_requests",
    **_lease_sql.TABLES,
    "runs": "runs",
    "migrations": "migrations",
    "cache_keys": "cache_keys",
}
_INDEXES = {
    "threads_owner_idx": "threads_owner_idx",
    "runs_open_idx": "runs_open_idx",
    "runs_owner_idx": "runs_owner_idx",
}


def identifiers(schema: str, prefix: str) -> dict[str, sql.Composable]:
    """The placeholder -> identifier map for a schema and a table prefix.

    Args:
        schema: the Postgres schema (``"public"``); any text, quoted as an identifier.
        prefix: prepended to every table and index name (``"tenxgraph_"``).

    Returns:
        ``{"schema": "schema", "threads": "schema"."prefixthreads", ...,
        "threads_owner_idx": "prefixthreads_owner_idx"}`` as composables: tables
        schema-qualified, index names bare (Postgres creates an index in its table's schema).
    """
    out: dict[str, sql.Composable] = {
        "schema": sql.Identifier(schema),
        "lease_channel": sql.Literal(lease_channel(schema, prefix)),
    }
    for key, table in _TABLES.items():
        out[key] = sql.Identifier(schema, prefix + table)
    for key, index in _INDEXES.items():
        out[key] = sql.Identifier(prefix + index)
    return out


def qualified_name(schema: str, prefix: str, table: str) -> str:
    """The quoted, schema-qualified name of ``table`` (e.g. ``"public"."tenxgraph_threads"``),
    as a *value* for :data:`TABLE_EXISTS`."""
    return sql.Identifier(schema, prefix + _TABLES[table]).as_string(None)


def render(template: LiteralString, idents: dict[str, sql.Composable]) -> LiteralString:
    """Compose ``template`` with ``idents`` into final SQL text (value placeholders kept)."""
    text = sql.SQL(template.strip()).format(**idents).as_string(None)
    # literal template text plus identifiers and literals quoted by psycopg.sql: no
    # caller-supplied text is spliced in, which is what LiteralString stands for
    return text  # pyright: ignore[reportReturnType]


def runs_channel(schema: str, prefix: str) -> str:
    """The ``LISTEN`` / ``NOTIFY`` channel of the submitted runs of one schema and prefix
    (channels are database-wide): ``tenxgraph_runs_`` and 16 hex digits of a digest of both,
    under Postgres's 63-byte identifier limit."""
    digest = hashlib.sha256(f"{schema}\x00{prefix}".encode()).hexdigest()[:16]
    return f"tenxgraph_runs_{digest}"


def lease_channel(schema: str, prefix: str) -> str:
    """The ``LISTEN`` / ``NOTIFY`` channel on which a release of a run lease wakes the runs
    waiting for it, one per schema and prefix: ``tenxgraph_lease_`` and 16 hex digits (see
    :func:`runs_channel`)."""
    digest = hashlib.sha256(f"{schema}\x00{prefix}".encode()).hexdigest()[:16]
    return f"tenxgraph_lease_{digest}"


def listen_statement(channel: str) -> bytes:
    """``LISTEN "<channel>"`` (the channel quoted as an identifier), as sent by a worker's
    listening connection (:mod:`tenxgraph.core._recovery`)."""
    return sql.SQL("LISTEN {channel}").format(channel=sql.Identifier(channel)).as_bytes(None)


def render_all(schema: str, prefix: str) -> dict[str, LiteralString]:
    """Every statement of :data:`ALL_STATEMENTS` rendered for ``schema`` and ``prefix``.

    Rendering happens once per store, so the hot path sends plain text that psycopg can keep
    as a prepared statement.
    """
    idents = identifiers(schema, prefix)
    return {name: render(s.template, idents) for name, s in ALL_STATEMENTS.items()}


_PLACEHOLDER = re.compile(r"%\((\w+)\)b|%%|%")


def positional(text: str) -> tuple[bytes, tuple[str, ...]]:
    """A rendered statement in the server's own placeholder syntax, for psycopg's raw cursors.

    psycopg parses a ``%(name)b`` statement on every execution and keeps the parsed form only
    for statements of at most 4096 bytes; ``LEASE_READ`` is longer (and any statement grows
    with the schema's and prefix's length), so it would be parsed again each time (about
    0.17 ms of client CPU). Numbered here once, it is sent as is.

    Args:
        text: a statement of :func:`render_all` (``%(name)b`` placeholders, ``%%`` for ``%``).

    Returns:
        ``(sql, names)``: the UTF-8 SQL with ``$1, $2 ...`` (one number per distinct name, in
        order of first use) and ``%`` for ``%%``; ``names[i]`` is the name of ``$i+1``.

    Raises:
        ValueError: a ``%`` that is neither a ``%(name)b`` placeholder nor ``%%``.
    """
    names: list[str] = []

    def number(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:
            if m.group(0) == "%%":
                return "%"
            raise ValueError(f"unexpected '%' at offset {m.start()} of a statement")
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PLACEHOLDER.sub(number, text).encode(), tuple(names)
