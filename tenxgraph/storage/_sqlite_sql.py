"""Every SQL statement of the SQLite tier, named, and its schema migrations; nothing else.

Conventions:

* values are always ``?`` parameters, never formatted into the text;
* blobs (``checkpoints."values"``, ``messages.data``, ``tool_executions.result``) are opaque
  bytes (they may hold NUL escapes); no JSON function ever touches them. JSON1 is used only on
  range lists (``checkpoints.ranges`` or a range-list parameter), which are JSON text we write;
* every statement that reads or writes a thread's data carries the owner check
  (``owner = ?``) itself, except the follow-up owner lookup on error paths.

Migrations: :data:`MIGRATIONS` is an append-only list whose index + 1 is the schema version;
each step runs in the same transaction as its ``schema_version`` row. Never edit a released step.
"""

from __future__ import annotations

from tenxgraph.storage.retention import ERASE_TABLES

__all__ = [
    "ROTATE_SCAN_CHECKPOINTS",
    "ROTATE_SCAN_LEDGER",
    "ROTATE_SCAN_MESSAGES",
    "ROTATE_SCAN_RUN_INPUTS",
    "ROTATE_SCAN_RUN_OUTPUTS",
    "ROTATE_SWAP_CHECKPOINTS",
    "ROTATE_SWAP_LEDGER",
    "ROTATE_SWAP_MESSAGES",
    "ROTATE_SWAP_RUN_INPUTS",
    "ROTATE_SWAP_RUN_OUTPUTS",
    "LEASE_GET",
    "LEASE_PUT",
    "LEASE_WAITERS",
    "LEASE_WAITERS_CLEAR",
    "LEASE_WAITER_PUT",
    "LEASE_WAITER_DELETE",
    "LEASE_RENEW",
    "LEASE_RELEASE",
    "LEASE_FENCE",
    "LEASE_RELEASE_BY_FENCE",
    "BEGIN_READ",
    "BEGIN_WRITE",
    "CLEAR_STOP",
    "COMMIT",
    "CREATE_SCHEMA_VERSION",
    "DELETE_CHECKPOINTS",
    "DELETE_LEDGER",
    "DELETE_MESSAGES",
    "DELETE_STOPS",
    "DELETE_THREAD",
    "ERASE_BY_OWNER",
    "ERASE_BY_THREAD",
    "ERASE_CANDIDATES",
    "GET_THREAD_TTL",
    "HISTORY_CHECKPOINTS",
    "INSERT_CHECKPOINT",
    "INSERT_LEDGER",
    "INSERT_MESSAGE",
    "INSERT_SCHEMA_VERSION",
    "INSERT_THREAD",
    "KV_DELETE",
    "KV_GET",
    "KV_KEYS",
    "KV_PURGE_EXPIRED",
    "KV_PUT",
    "LATEST_SCHEMA_VERSION",
    "LEDGER_COUNT",
    "LEDGER_GET",
    "LEDGER_READ_BACK",
    "LIST_THREADS_ALL",
    "LIST_THREADS_OWNER",
    "MESSAGES_IN_RANGES",
    "MIGRATIONS",
    "RUN_FOREIGN",
    "RUN_GET",
    "RUN_INSERT",
    "RUN_LIST",
    "RUN_OPEN",
    "RUN_UPDATE",
    "PRAGMA_JOURNAL_WAL",
    "PRAGMA_SYNCHRONOUS",
    "PRUNE_CHECKPOINTS",
    "PRUNE_MESSAGES",
    "READ_CHECKPOINT",
    "ROLLBACK",
    "SCHEMA_VERSION",
    "SCHEMA_VERSION_TABLE_EXISTS",
    "SELECT_STOP",
    "SELECT_VERSION",
    "SET_METADATA",
    "SET_STOP",
    "SET_THREAD_TTL",
    "SWEEP_CANDIDATES",
    "THREAD_OWNERS",
    "THREAD_OWNER_VERSION",
    "UPDATE_THREAD_CAS",
]

# -- connection and transactions ------------------------------------------------------------------
#: WAL: readers never block the writer and see a consistent snapshot.
PRAGMA_JOURNAL_WAL = "PRAGMA journal_mode=WAL"
#: ``{level}`` is one of the two literals the store validates (``NORMAL``, ``FULL``).
PRAGMA_SYNCHRONOUS = "PRAGMA synchronous={level}"
#: A read snapshot (deferred: takes no lock until the first SELECT).
BEGIN_READ = "BEGIN"
#: Take the database's write lock now (waiting up to the busy timeout): the compare-and-swap
#: and everything after it are serialized across connections and OS processes.
BEGIN_WRITE = "BEGIN IMMEDIATE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"

# -- schema ---------------------------------------------------------------------------------------
CREATE_SCHEMA_VERSION = (
    "CREATE TABLE IF NOT EXISTS schema_version ("
    " version INTEGER PRIMARY KEY,"
    " applied_at REAL NOT NULL)"
)
SCHEMA_VERSION_TABLE_EXISTS = (
    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
)
SCHEMA_VERSION = "SELECT COALESCE(MAX(version), 0) FROM schema_version"
INSERT_SCHEMA_VERSION = "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)"

#: Ordered schema steps; ``MIGRATIONS[i]`` brings the schema to version ``i + 1``.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: threads, versions and message rows.
    (
        "CREATE TABLE threads ("
        " thread_id TEXT PRIMARY KEY,"
        " owner TEXT NOT NULL,"
        " version INTEGER NOT NULL,"
        " status TEXT NOT NULL,"
        " created_at REAL NOT NULL,"
        " updated_at REAL NOT NULL,"
        " metadata TEXT NOT NULL DEFAULT '{}')",  # JSON text
        "CREATE TABLE checkpoints ("
        " thread_id TEXT NOT NULL,"
        " version INTEGER NOT NULL,"
        ' "values" BLOB NOT NULL,'
        " ranges TEXT NOT NULL,"  # JSON text: [[start, end), ...] in list order
        " next_seq INTEGER NOT NULL,"
        " min_seq INTEGER NOT NULL,"  # smallest seq the version references (pruning)
        " status TEXT NOT NULL,"
        " created_at REAL NOT NULL,"
        " PRIMARY KEY (thread_id, version))",
        "CREATE TABLE messages ("
        " thread_id TEXT NOT NULL,"
        " seq INTEGER NOT NULL,"
        " data BLOB NOT NULL,"
        " PRIMARY KEY (thread_id, seq))",
    ),
    # 2: durable stop requests; listing a user's threads by recency.
    (
        "ALTER TABLE threads ADD COLUMN stop_requested INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX threads_owner_updated ON threads (owner, updated_at DESC)",
    ),
    # 3: the tool idempotency ledger.
    (
        "CREATE TABLE tool_executions ("
        " thread_id TEXT NOT NULL,"
        " call_key TEXT NOT NULL,"
        " tool_call_id TEXT NOT NULL,"
        " tool_name TEXT NOT NULL,"
        " result BLOB NOT NULL,"
        " created_at REAL NOT NULL,"
        " PRIMARY KEY (thread_id, call_key))",
    ),
    # 4: timed stop requests, also for a thread without a checkpoint yet (supersedes
    # threads.stop_requested, no longer read): a run honours only a request made after it
    # started.
    (
        "CREATE TABLE stop_requests ("
        " thread_id TEXT NOT NULL,"
        " owner TEXT NOT NULL,"
        " requested_at REAL NOT NULL,"  # UNIX seconds; the newest request of that user
        " PRIMARY KEY (thread_id, owner))",
    ),
    # 5: the generic cache of application values and state-cache entries (10xGraph's
    # aput_cache_value / aput_state_cache); never read by a run.
    (
        "CREATE TABLE cache_values ("
        " namespace TEXT NOT NULL,"
        " key TEXT NOT NULL,"
        " value BLOB NOT NULL,"
        " expires_at REAL,"  # UNIX seconds; NULL: never
        " PRIMARY KEY (namespace, key))",
    ),
    # 6: run leases (multitask strategies, docs/run-lease.md): the holder of each thread's
    # lease with its fencing token and expiry, and the runs queued for it in arrival order.
    (
        "CREATE TABLE thread_leases ("
        " thread_id TEXT PRIMARY KEY,"
        " owner TEXT NOT NULL,"
        " holder TEXT NOT NULL,"  # run id; '' when released
        " fence INTEGER NOT NULL,"  # incremented by every acquisition
        " expires_at REAL NOT NULL)",  # UNIX seconds
        "CREATE TABLE lease_waiters ("
        " thread_id TEXT NOT NULL,"
        " waiter TEXT NOT NULL,"  # run id
        " arrived_at REAL NOT NULL,"
        " seen_at REAL NOT NULL,"
        " PRIMARY KEY (thread_id, waiter))",
    ),
    # 7: submitted (background) runs, recovered by workers (docs/how-to/background-runs.md).
    (
        "CREATE TABLE runs ("
        " thread_id TEXT NOT NULL,"
        " run_id TEXT NOT NULL,"
        " owner TEXT NOT NULL,"
        " status TEXT NOT NULL,"  # pending, running, interrupted, completed, error, cancelled
        " input BLOB NOT NULL,"  # orjson
        " config BLOB NOT NULL,"  # orjson
        " attempts INTEGER NOT NULL DEFAULT 0,"
        " crashes INTEGER NOT NULL DEFAULT 0,"
        " holder TEXT NOT NULL DEFAULT '',"
        " worker TEXT NOT NULL DEFAULT '',"
        " last_error TEXT NOT NULL DEFAULT '',"
        " output BLOB,"  # orjson; NULL until done
        " created_at REAL NOT NULL,"
        " updated_at REAL NOT NULL,"
        " PRIMARY KEY (thread_id, run_id))",
        "CREATE INDEX runs_open_idx ON runs (created_at) WHERE status IN ('pending', 'running')",
    ),
    # 8: a thread's own retention override (seconds; NULL: the checkpointer's thread_ttl_s)
    # and the index erasing a user finds their runs by (tenxgraph.storage.retention).
    (
        "ALTER TABLE threads ADD COLUMN ttl_s REAL",
        "CREATE INDEX runs_owner_idx ON runs (owner)",
    ),
)

#: The schema version this code writes and understands.
LATEST_SCHEMA_VERSION = len(MIGRATIONS)

# -- run leases (tenxgraph.storage._lease_sqlite) -------------------------------------------------
LEASE_GET = "SELECT owner, holder, fence, expires_at FROM thread_leases WHERE thread_id = ?"
LEASE_PUT = (
    "INSERT INTO thread_leases (thread_id, owner, holder, fence, expires_at)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (thread_id) DO UPDATE SET owner = excluded.owner,"
    " holder = excluded.holder, fence = excluded.fence, expires_at = excluded.expires_at"
)
LEASE_WAITERS = "SELECT waiter, arrived_at, seen_at FROM lease_waiters WHERE thread_id = ?"
LEASE_WAITERS_CLEAR = "DELETE FROM lease_waiters WHERE thread_id = ?"
LEASE_WAITER_PUT = (
    "INSERT INTO lease_waiters (thread_id, waiter, arrived_at, seen_at) VALUES (?, ?, ?, ?)"
)
LEASE_WAITER_DELETE = "DELETE FROM lease_waiters WHERE thread_id = ? AND waiter = ?"
LEASE_RENEW = (
    "UPDATE thread_leases SET expires_at = ? WHERE thread_id = ? AND holder = ? AND fence = ?"
)
LEASE_RELEASE = (
    "UPDATE thread_leases SET holder = '', expires_at = 0"
    " WHERE thread_id = ? AND holder = ? AND fence = ?"
)
#: Fencing check of a checkpoint write, inside its BEGIN IMMEDIATE transaction.
LEASE_FENCE = "SELECT fence FROM thread_leases WHERE thread_id = ?"
#: The release folded into a run's last checkpoint write (same transaction).
LEASE_RELEASE_BY_FENCE = (
    "UPDATE thread_leases SET holder = '', expires_at = 0 WHERE thread_id = ? AND fence = ?"
)

# -- checkpoint write (one BEGIN IMMEDIATE transaction) -------------------------------------------
#: Create a thread at version 1 (expected version 0); no row changed = it already exists.
INSERT_THREAD = (
    "INSERT INTO threads (thread_id, owner, version, status, created_at, updated_at)"
    " VALUES (?, ?, 1, ?, ?, ?)"
    " ON CONFLICT (thread_id) DO NOTHING"
)
#: The compare-and-swap: no row changed = stale version or another owner.
UPDATE_THREAD_CAS = (
    "UPDATE threads SET version = ?, status = ?, updated_at = ?"
    " WHERE thread_id = ? AND owner = ? AND version = ?"
)
#: Error path only: tells a stale version from another owner's thread.
THREAD_OWNER_VERSION = "SELECT owner, version FROM threads WHERE thread_id = ?"
INSERT_CHECKPOINT = (
    'INSERT INTO checkpoints (thread_id, version, "values", ranges, next_seq, min_seq, status,'
    " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_MESSAGE = "INSERT INTO messages (thread_id, seq, data) VALUES (?, ?, ?)"
#: Drop versions ``<= ?`` (older than the newest ``history_limit``).
PRUNE_CHECKPOINTS = "DELETE FROM checkpoints WHERE thread_id = ? AND version <= ?"
#: Drop message rows below the smallest seq any kept version references.
PRUNE_MESSAGES = (
    "DELETE FROM messages WHERE thread_id = ?"
    " AND seq < (SELECT MIN(min_seq) FROM checkpoints WHERE thread_id = ?)"
)

# -- reads ----------------------------------------------------------------------------------------
#: One version (``?3`` = version, or NULL for the latest), owner-checked.
READ_CHECKPOINT = (
    'SELECT c.version, c."values", c.ranges, c.next_seq, c.status, c.created_at'
    " FROM threads AS h JOIN checkpoints AS c ON c.thread_id = h.thread_id"
    " WHERE h.thread_id = ?1 AND h.owner = ?2 AND c.version = COALESCE(?3, h.version)"
)
#: Kept versions below ``?3``, newest first, at most ``?4`` (-1: all), owner-checked.
HISTORY_CHECKPOINTS = (
    'SELECT c.version, c."values", c.ranges, c.next_seq, c.status, c.created_at'
    " FROM threads AS h JOIN checkpoints AS c ON c.thread_id = h.thread_id"
    " WHERE h.thread_id = ?1 AND h.owner = ?2 AND c.version < ?3"
    " ORDER BY c.version DESC LIMIT ?4"
)
#: ``(seq, data)`` of the message rows covered by a range list (``?1``: JSON text
#: ``[[start, end], ...]`` of disjoint ranges): one index range scan per range, in no particular
#: order (the caller places rows by seq; an ORDER BY would sort every blob in a temp B-tree).
#: Used inside the read transaction that read the ranges, so rows and ranges share a snapshot.
MESSAGES_IN_RANGES = (
    "SELECT m.seq, m.data FROM json_each(?1) AS r"
    " JOIN messages AS m ON m.thread_id = ?2"
    " AND m.seq >= json_extract(r.value, '$[0]') AND m.seq < json_extract(r.value, '$[1]')"
)
SELECT_VERSION = "SELECT version FROM threads WHERE thread_id = ? AND owner = ?"
LIST_THREADS_OWNER = (
    "SELECT thread_id, owner, version, status, created_at, updated_at, metadata FROM threads"
    " WHERE owner = ? ORDER BY updated_at DESC, thread_id LIMIT ? OFFSET ?"
)
LIST_THREADS_ALL = (
    "SELECT thread_id, owner, version, status, created_at, updated_at, metadata FROM threads"
    " ORDER BY updated_at DESC, thread_id LIMIT ? OFFSET ?"
)

# -- thread maintenance ---------------------------------------------------------------------------
DELETE_THREAD = "DELETE FROM threads WHERE thread_id = ? AND owner = ?"
#: Run only after :data:`DELETE_THREAD` removed the owner's row in the same transaction.
DELETE_CHECKPOINTS = "DELETE FROM checkpoints WHERE thread_id = ?"
DELETE_MESSAGES = "DELETE FROM messages WHERE thread_id = ?"
DELETE_LEDGER = "DELETE FROM tool_executions WHERE thread_id = ?"
SET_METADATA = "UPDATE threads SET metadata = ? WHERE thread_id = ? AND owner = ?"
DELETE_STOPS = "DELETE FROM stop_requests WHERE thread_id = ?"
#: Record a stop request (the newest time wins) unless another user owns the thread; also
#: before the thread's first checkpoint. Zero rows changed: another user owns it.
SET_STOP = (
    "INSERT INTO stop_requests (thread_id, owner, requested_at)"
    " SELECT ?1, ?2, ?3"
    " WHERE NOT EXISTS (SELECT 1 FROM threads WHERE thread_id = ?1 AND owner <> ?2)"
    " ON CONFLICT (thread_id, owner)"
    " DO UPDATE SET requested_at = max(requested_at, excluded.requested_at)"
)
CLEAR_STOP = "DELETE FROM stop_requests WHERE thread_id = ? AND owner = ?"
#: The time of the caller's stop request, unless another user owns the thread.
SELECT_STOP = (
    "SELECT requested_at FROM stop_requests WHERE thread_id = ?1 AND owner = ?2"
    " AND NOT EXISTS (SELECT 1 FROM threads WHERE thread_id = ?1 AND owner <> ?2)"
)

# -- ledger ---------------------------------------------------------------------------------------
#: Insert if absent, only on the caller's own thread (the owner check is the EXISTS).
INSERT_LEDGER = (
    "INSERT INTO tool_executions"
    " (thread_id, call_key, tool_call_id, tool_name, result, created_at)"
    " SELECT ?1, ?2, ?3, ?4, ?5, ?6"
    " WHERE EXISTS (SELECT 1 FROM threads WHERE thread_id = ?1 AND owner = ?7)"
    " ON CONFLICT (thread_id, call_key) DO NOTHING"
)
#: The row that won, owner-checked.
LEDGER_READ_BACK = (
    "SELECT t.tool_call_id, t.tool_name, t.result, t.created_at"
    " FROM tool_executions AS t JOIN threads AS h ON h.thread_id = t.thread_id"
    " WHERE t.thread_id = ?1 AND t.call_key = ?2 AND h.owner = ?3"
)
#: One row per existing thread: ``mine`` (owner matches), then the entry's columns (NULL when
#: absent or not mine: the ledger row is joined only under the owner check).
LEDGER_GET = (
    "SELECT h.owner = ?3, t.tool_call_id, t.tool_name, t.result, t.created_at"
    " FROM threads AS h LEFT JOIN tool_executions AS t"
    " ON t.thread_id = h.thread_id AND t.call_key = ?2 AND h.owner = ?3"
    " WHERE h.thread_id = ?1"
)
#: One row per existing thread: ``mine``, then the row count (0 when not mine).
LEDGER_COUNT = (
    "SELECT h.owner = ?2,"
    " (SELECT COUNT(*) FROM tool_executions AS t WHERE t.thread_id = h.thread_id AND h.owner = ?2)"
    " FROM threads AS h WHERE h.thread_id = ?1"
)

# -- generic cache values (schema 5) --------------------------------------------------------------
KV_PUT = (
    "INSERT INTO cache_values (namespace, key, value, expires_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, "
    "expires_at = excluded.expires_at"
)
#: Parameters: namespace, key, now.
KV_GET = (
    "SELECT value FROM cache_values WHERE namespace = ? AND key = ? "
    "AND (expires_at IS NULL OR expires_at > ?)"
)
#: Parameters: namespace, key. Returns the deleted row's ``expires_at`` (if a row was there).
KV_DELETE = "DELETE FROM cache_values WHERE namespace = ? AND key = ? RETURNING expires_at"
#: Parameters: namespace, prefix length, prefix, now.
KV_KEYS = (
    "SELECT key FROM cache_values WHERE namespace = ? AND substr(key, 1, ?) = ? "
    "AND (expires_at IS NULL OR expires_at > ?) ORDER BY key"
)
#: Parameters: now.
KV_PURGE_EXPIRED = "DELETE FROM cache_values WHERE expires_at IS NOT NULL AND expires_at <= ?"

# -- time travel (tenxgraph.storage._fork; one BEGIN IMMEDIATE transaction per fork) -------------
#: ``(oldest kept, latest)`` version of an owned thread (NULLs when missing or not owned).
KEPT_VERSIONS = (
    "SELECT MIN(c.version), MAX(c.version)"
    " FROM threads AS h JOIN checkpoints AS c ON c.thread_id = h.thread_id"
    " WHERE h.thread_id = ? AND h.owner = ?"
)
#: A row when version ``?3`` of the thread ``?1`` owned by ``?2`` is kept.
VERSION_KEPT = (
    "SELECT 1 FROM threads AS h JOIN checkpoints AS c ON c.thread_id = h.thread_id"
    " WHERE h.thread_id = ?1 AND h.owner = ?2 AND c.version = ?3"
)
#: Create the fork's thread at version 1 with its metadata; no row changed = it exists.
FORK_THREAD = (
    "INSERT INTO threads (thread_id, owner, version, status, created_at, updated_at, metadata)"
    " VALUES (?, ?, 1, ?, ?, ?, ?)"
    " ON CONFLICT (thread_id) DO NOTHING"
)
#: Copy the source's message rows of a range list (``?2``: JSON text ``[[start, end], ...]``)
#: from thread ``?3`` into thread ``?1`` under the same seqs: one statement, no decoding.
FORK_COPY_MESSAGES = (
    "INSERT INTO messages (thread_id, seq, data)"
    " SELECT ?1, m.seq, m.data FROM json_each(?2) AS r"
    " JOIN messages AS m ON m.thread_id = ?3"
    " AND m.seq >= json_extract(r.value, '$[0]') AND m.seq < json_extract(r.value, '$[1]')"
)
#: Copy every ledger row of thread ``?2`` into thread ``?1``.
FORK_COPY_LEDGER = (
    "INSERT INTO tool_executions (thread_id, call_key, tool_call_id, tool_name, result,"
    " created_at) SELECT ?1, call_key, tool_call_id, tool_name, result, created_at"
    " FROM tool_executions WHERE thread_id = ?2"
)

# -- submitted runs (schema version 7) ------------------------------------------------------------
# -- erasure and retention (tenxgraph.storage.retention) -------------------------------------------
#: Thread ids an owner holds anything of (parameters: the owner four times).
ERASE_CANDIDATES = (
    "SELECT thread_id FROM threads WHERE owner = ?"
    " UNION SELECT thread_id FROM runs WHERE owner = ?"
    " UNION SELECT thread_id FROM stop_requests WHERE owner = ?"
    " UNION SELECT thread_id FROM thread_leases WHERE owner = ?"
)
#: Owners of the threads among a JSON list of thread ids.
THREAD_OWNERS = (
    "SELECT thread_id, owner FROM threads WHERE thread_id IN (SELECT value FROM json_each(?))"
)
#: ``DELETE FROM <table> WHERE thread_id IN (<JSON list>)``, per table, in
#: ``tenxgraph.storage.retention.ERASE_TABLES`` order.
ERASE_BY_THREAD = {
    table: f"DELETE FROM {table} WHERE thread_id IN (SELECT value FROM json_each(?))"
    for table in ERASE_TABLES
}
#: The rows an owner holds on threads that are not theirs (or that do not exist), per table.
ERASE_BY_OWNER = {
    table: f"DELETE FROM {table} WHERE owner = ?"
    for table in ("stop_requests", "thread_leases", "runs")
}
#: Threads idle longer than their TTL (own ``ttl_s``, else the default) holding no live run
#: lease and no open run, oldest first (parameters: now, default TTL, lease clock, limit).
SWEEP_CANDIDATES = (
    "SELECT t.thread_id, t.owner FROM threads AS t"
    " WHERE t.updated_at < ? - COALESCE(t.ttl_s, ?)"
    " AND NOT EXISTS (SELECT 1 FROM thread_leases AS l WHERE l.thread_id = t.thread_id"
    " AND l.holder <> '' AND l.expires_at > ?)"
    " AND NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.thread_id = t.thread_id"
    " AND r.status IN ('pending', 'running'))"
    " ORDER BY t.updated_at LIMIT ?"
)
SET_THREAD_TTL = "UPDATE threads SET ttl_s = ? WHERE thread_id = ? AND owner = ?"
GET_THREAD_TTL = "SELECT ttl_s FROM threads WHERE thread_id = ? AND owner = ?"

_RUN_COLUMNS = (
    "run_id, thread_id, owner, status, input, config, attempts, crashes, holder, worker,"
    " last_error, output, created_at, updated_at"
)
#: Another user owns the thread (a checkpoint or a submitted run of theirs): a row back.
RUN_FOREIGN = (
    "SELECT 1 FROM threads WHERE thread_id = ?1 AND owner <> ?2"
    " UNION ALL SELECT 1 FROM runs WHERE thread_id = ?1 AND owner <> ?2 LIMIT 1"
)
#: Record a submitted run; no row changed: its id is already recorded (kept as is).
RUN_INSERT = (
    "INSERT INTO runs (thread_id, run_id, owner, status, input, config, created_at, updated_at)"
    " VALUES (?, ?, ?, 'pending', ?, ?, ?, ?) ON CONFLICT (thread_id, run_id) DO NOTHING"
)
RUN_GET = "SELECT " + _RUN_COLUMNS + " FROM runs WHERE thread_id = ? AND run_id = ? AND owner = ?"
#: An owner's runs (``''``: all; no user id is empty), optionally of one status (``''``: any) and one thread.
RUN_LIST = (
    "SELECT " + _RUN_COLUMNS + " FROM runs WHERE (?1 = '' OR owner = ?1)"
    " AND (?2 = '' OR status = ?2) AND (?3 = '' OR thread_id = ?3)"
    " ORDER BY created_at DESC LIMIT ?4"
)
#: The open runs of every owner, oldest first (a worker's sweep).
RUN_OPEN = (
    "SELECT " + _RUN_COLUMNS + " FROM runs WHERE status IN ('pending', 'running')"
    " ORDER BY created_at LIMIT ?"
)
#: Compare-and-swap on (status, attempts); no row changed: it moved meanwhile.
RUN_UPDATE = (
    "UPDATE runs SET status = ?, attempts = ?, crashes = ?, holder = ?, worker = ?,"
    " last_error = ?, output = ?, updated_at = ?"
    " WHERE thread_id = ? AND run_id = ? AND status = ? AND attempts = ?"
)


# -- rotate-keys (tenxgraph.storage._rotate) --------------------------------------------------------
#: A page of rows after a ``(thread_id, position)`` cursor with their owner: ``?1``, ``?2`` the
#: cursor, ``?3`` every row (1) or only those whose first ``?4`` bytes are not ``?5``, ``?6`` the
#: page size (checkpoints: ``?7`` created before).
ROTATE_SCAN_CHECKPOINTS = (
    'SELECT x.thread_id, h.owner, x.version, x."values" FROM checkpoints AS x'
    " JOIN threads AS h ON h.thread_id = x.thread_id"
    " WHERE (x.thread_id, x.version) > (?1, ?2) AND x.created_at < ?7"
    ' AND (?3 OR substr(x."values", 1, ?4) != ?5)'
    " ORDER BY x.thread_id, x.version LIMIT ?6"
)
ROTATE_SCAN_MESSAGES = (
    "SELECT x.thread_id, h.owner, x.seq, x.data FROM messages AS x"
    " JOIN threads AS h ON h.thread_id = x.thread_id"
    " WHERE (x.thread_id, x.seq) > (?1, ?2)"
    " AND (?3 OR substr(x.data, 1, ?4) != ?5)"
    " ORDER BY x.thread_id, x.seq LIMIT ?6"
)
ROTATE_SCAN_LEDGER = (
    "SELECT x.thread_id, h.owner, x.call_key, x.result FROM tool_executions AS x"
    " JOIN threads AS h ON h.thread_id = x.thread_id"
    " WHERE (x.thread_id, x.call_key) > (?1, ?2)"
    " AND (?3 OR substr(x.result, 1, ?4) != ?5)"
    " ORDER BY x.thread_id, x.call_key LIMIT ?6"
)
#: The background runs' payload columns (``runs.input``, ``runs.output``: a NULL output, a
#: run not done yet, is no row), with the run's own owner.
ROTATE_SCAN_RUN_INPUTS = (
    "SELECT x.thread_id, x.owner, x.run_id, x.input FROM runs AS x"
    " WHERE (x.thread_id, x.run_id) > (?1, ?2)"
    " AND (?3 OR substr(x.input, 1, ?4) != ?5)"
    " ORDER BY x.thread_id, x.run_id LIMIT ?6"
)
ROTATE_SCAN_RUN_OUTPUTS = (
    "SELECT x.thread_id, x.owner, x.run_id, x.output FROM runs AS x"
    " WHERE (x.thread_id, x.run_id) > (?1, ?2) AND x.output IS NOT NULL"
    " AND (?3 OR substr(x.output, 1, ?4) != ?5)"
    " ORDER BY x.thread_id, x.run_id LIMIT ?6"
)
#: Replace one row's sealed payload (``?1``) if its bytes are still the ones read (``?4``).
ROTATE_SWAP_CHECKPOINTS = (
    'UPDATE checkpoints SET "values" = ?1 WHERE thread_id = ?2 AND version = ?3 AND "values" = ?4'
)
ROTATE_SWAP_MESSAGES = (
    "UPDATE messages SET data = ?1 WHERE thread_id = ?2 AND seq = ?3 AND data = ?4"
)
ROTATE_SWAP_LEDGER = (
    "UPDATE tool_executions SET result = ?1 WHERE thread_id = ?2 AND call_key = ?3 AND result = ?4"
)
ROTATE_SWAP_RUN_INPUTS = (
    "UPDATE runs SET input = ?1 WHERE thread_id = ?2 AND run_id = ?3 AND input = ?4"
)
ROTATE_SWAP_RUN_OUTPUTS = (
    "UPDATE runs SET output = ?1 WHERE thread_id = ?2 AND run_id = ?3 AND output = ?4"
)
