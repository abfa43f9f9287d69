"""The run lease's SQL for the Postgres tier (DESIGN section 3, docs/how-to/run-lease.md); templates only.

Kept apart from :mod:`tenxgraph.storage._sql` so that the lease can be folded into the run's
first read and its checkpoint writes without rewriting them: each piece below is either a
whole statement (wrapped into a :class:`tenxgraph.storage._sql.Statement` there) or a fragment
written to be prepended as a CTE, or added as a condition, to an existing statement. Same
conventions as ``_sql``: ``{table}`` placeholders composed as identifiers, values always
``%(name)b`` parameters, every table filtered on ``thread_id`` (partition pruning, Citus).

Tables (schema versions 5 and 6, :mod:`tenxgraph.storage._migrations`):

* ``thread_leases``: ``(thread_id)``: ``owner``, ``holder`` (the run id holding the lease,
  ``''`` when released), ``fence`` (larger at every acquisition, see :data:`NEW_FENCE`),
  ``wanted`` (a refused attempt queued since the last grant), ``expires_at`` (UNIX
  seconds on the *server's* clock, so application hosts with skewed clocks agree),
  ``settled_version`` (the thread's version when the lease was last released; ``-1`` after a
  take-over from a holder that had not released it).
* ``lease_waiters``: ``(thread_id, waiter)``: ``arrived_at`` (first attempt), ``seen_at``
  (latest attempt): runs queued for the lease, served in arrival order; one not seen for
  ``lapse_s`` seconds loses its place.

Time is ``statement_timestamp()``: one value for the whole statement, taken when it started.

An acquisition attempt commits with ``synchronous_commit = off`` (``clock.lazy_commit``, for
its own transaction only): no WAL flush of its own. A grant lost in a server crash cannot give
its fence to another run (:data:`NEW_FENCE`), and its holder's first checkpoint write flushes it
(docs/guarantees.md, "Run lease durability").

A release (``RELEASE``, ``RELEASE_CTE``) wakes the first run in line with ``NOTIFY`` on the
store's lease channel (:data:`WAKE`; ``{lease_channel}`` is a literal rendered with the
identifiers, ``_sql.lease_channel``), only when a run waits.

Where each piece is called today (one round trip each unless said):

* ``ACQUIRE_CTES`` / ``ACQUIRE_COLUMNS`` (fragments, folded): the run's first read when it
  needs the lease is ``_sql.LEASE_READ``: these CTEs, then ``READ_SINCE``'s, the read gated on
  ``took`` (a refused attempt reads nothing, a granted one reads the thread): no extra round
  trip. The read's snapshot is the statement's, taken before ``took`` may wait for the
  previous holder's last write (its row lock on ``thread_leases``); ``took`` returns
  ``settled_version`` (set by the release), and the caller reads again when it is newer than
  what the statement read, or ``-1`` (the grant took over a lapsed holder): a second round trip
  on that rare path only. Queued runs send the same statement for every attempt.
* ``ACQUIRE`` (statement): ``PostgresStore.lease_acquire``: the same attempt without the read
  (the store-level API; the runtime uses ``LEASE_READ``).
* ``FENCE_CONDITION`` (fragment, folded): an ``AND`` term of the compare-and-swap's ``UPDATE``
  in ``CHECKPOINT_CAS`` and of the ``INSERT``'s ``SELECT`` in ``CHECKPOINT_CREATE``: no extra
  round trip. ``FOR SHARE`` makes a concurrent acquisition wait for this write (or this write
  see the new fence), so a write can never commit after another run took the lease. Only the
  leased variants carry it (``CHECKPOINT_CAS``, ``CHECKPOINT_CAS_LEASE``, ``CHECKPOINT_CREATE``);
  a write made outside a lease sends a ``_PLAIN`` or ``_PRUNE`` variant without it.
* ``RELEASE_CTE`` (fragment, folded): appended to the CTEs of the same leased variants (after
  ``cas``): the run's last checkpoint write releases the lease in the same statement
  (``%(release)b``) and records the version it wrote as ``settled_version``.
* ``PEEK`` (statement, read-only): a queued run's polls between two ``ACQUIRE`` s when it
  cannot be woken (no ``LISTEN`` connection: behind a pooler, SQLite, memory); it sends
  ``ACQUIRE`` only when the lease looks free and it is next in line, or to keep its place.
* ``RENEW`` (statement): the holder's renewal task, every ``lease_renew_s`` seconds (off the
  step path: a run shorter than that never sends it).
* ``RELEASE`` (statement): only when the run ended without a final write carrying the release
  (a run that wrote nothing, an error before the first checkpoint, a queued run giving up).
"""

from __future__ import annotations

from typing import LiteralString

__all__ = [
    "ACQUIRE",
    "ACQUIRE_COLUMNS",
    "ACQUIRE_CTES",
    "FENCE_CONDITION",
    "NEW_FENCE",
    "PEEK",
    "RELEASE",
    "RELEASE_CTE",
    "RENEW",
    "TABLES",
    "WAKE",
]

#: Table placeholders this module adds (placeholder -> unprefixed table name).
TABLES: dict[str, str] = {"thread_leases": "thread_leases", "lease_waiters": "lease_waiters"}

#: A new grant's fencing token: the statement's time in microseconds (server clock) times
#: 1024 plus 10 random bits; a grant over an existing row takes ``greatest(previous + 1, this)``,
#: so fences still increase on every grant. Drawn from the clock rather than counted from the
#: row, so that a grant lost in a server crash (its commit is not flushed, see
#: ``clock.lazy_commit``) is never issued again to another run: the next grant comes after the
#: restart, later on the clock (docs/guarantees.md, "Run lease durability").
NEW_FENCE: LiteralString = "((clock.now * 1e6)::int8 * 1024 + floor(random() * 1024)::int8)"

#: ``RETURNING`` item of a release (``lease`` is the released ``thread_leases`` row): when a
#: run waits for the lease (a live ``lease_waiters`` row in the statement's snapshot, or the
#: row's ``wanted`` flag, set by a refused attempt that committed while the release waited for
#: its row lock), ``NOTIFY`` the store's lease channel (``{lease_channel}``, a literal) with
#: ``["<thread_id>", "<first waiter in line>" | null]``; sent when the release commits.
WAKE: LiteralString = """CASE WHEN lease.wanted OR EXISTS (
           SELECT 1 FROM {lease_waiters} AS w WHERE w.thread_id = %(thread_id)b)
       THEN pg_notify({lease_channel}, json_build_array(%(thread_id)b::text, (
           SELECT w.waiter FROM {lease_waiters} AS w WHERE w.thread_id = %(thread_id)b
            ORDER BY w.arrived_at, w.waiter LIMIT 1))::text) END"""

#: The CTEs of one acquisition attempt (``clock``, ``foreign_thread``, ``mine``, ``took``,
#: ``queued``, ``dequeued``), shared by ``ACQUIRE`` and the folded first read
#: (``_sql.LEASE_READ``). ``took`` returns the granted ``fence`` and ``settled`` (the thread's
#: version when the lease was released, ``-1`` when the grant took it over from a holder that
#: had not released it: the caller's snapshot may predate that holder's last write).
ACQUIRE_CTES: LiteralString = (
    """clock AS (
    SELECT extract(epoch FROM statement_timestamp())::float8 AS now,
           set_config('synchronous_commit', 'off', true) AS lazy_commit
), foreign_thread AS (
    SELECT 1 FROM {threads} WHERE thread_id = %(thread_id)b AND owner <> %(owner)b
), mine AS (
    SELECT w.arrived_at FROM {lease_waiters} AS w
     WHERE w.thread_id = %(thread_id)b AND w.waiter = %(holder)b
), took AS (
    INSERT INTO {thread_leases} AS l (thread_id, owner, holder, fence, expires_at)
    SELECT %(thread_id)b, %(owner)b, %(holder)b, """
    + NEW_FENCE
    + """, clock.now + %(ttl_s)b::float8
      FROM clock
     WHERE NOT EXISTS (SELECT 1 FROM foreign_thread)
        ON CONFLICT (thread_id) DO UPDATE
       SET owner = excluded.owner, holder = excluded.holder,
           fence = greatest(l.fence + 1, excluded.fence),
           expires_at = excluded.expires_at, wanted = false,
           settled_version = CASE WHEN l.holder IN ('', excluded.holder) THEN l.settled_version
                                  ELSE -1 END
     WHERE (l.holder IN ('', excluded.holder)
            OR l.expires_at <= excluded.expires_at - %(ttl_s)b::float8)
       AND (l.owner = excluded.owner
            OR NOT EXISTS (SELECT 1 FROM {threads} AS t WHERE t.thread_id = %(thread_id)b))
       AND NOT EXISTS (
           SELECT 1 FROM {lease_waiters} AS o
            WHERE o.thread_id = %(thread_id)b AND o.waiter <> %(holder)b
              AND o.seen_at > excluded.expires_at - %(ttl_s)b::float8 - %(lapse_s)b::float8
              AND (o.arrived_at, o.waiter)
                  < (coalesce((SELECT arrived_at FROM mine), 'infinity'::float8), %(holder)b))
 RETURNING l.fence, l.settled_version
), wanting AS (
    UPDATE {thread_leases} AS l SET wanted = true
     WHERE l.thread_id = %(thread_id)b AND %(queue)b::bool AND NOT l.wanted
       AND NOT EXISTS (SELECT 1 FROM took) AND NOT EXISTS (SELECT 1 FROM foreign_thread)
), queued AS (
    INSERT INTO {lease_waiters} AS w (thread_id, waiter, arrived_at, seen_at)
    SELECT %(thread_id)b, %(holder)b, clock.now, clock.now
      FROM clock
     WHERE %(queue)b::bool AND NOT EXISTS (SELECT 1 FROM took)
       AND NOT EXISTS (SELECT 1 FROM foreign_thread)
        ON CONFLICT (thread_id, waiter) DO UPDATE SET seen_at = excluded.seen_at
     WHERE w.seen_at <= excluded.seen_at - %(lapse_s)b::float8 / 4
), dequeued AS (
    DELETE FROM {lease_waiters} AS w
     WHERE w.thread_id = %(thread_id)b
       AND ((w.waiter = %(holder)b AND EXISTS (SELECT 1 FROM took))
            OR (w.waiter <> %(holder)b
                AND w.seen_at <= (SELECT now FROM clock) - %(lapse_s)b::float8))
)"""
)

#: The answer of an acquisition attempt, as select-list items over ``FROM clock``: granted
#: ``fence`` (NULL: refused), ``foreign`` (another user owns the thread or holds its lease:
#: forbidden), ``expires_in_s`` (of the holder when refused, of the caller when granted; NULL
#: when unknown), ``ahead`` (live waiters queued before the caller).
ACQUIRE_COLUMNS: LiteralString = """(SELECT fence FROM took),
       EXISTS (SELECT 1 FROM foreign_thread)
         OR (NOT EXISTS (SELECT 1 FROM took) AND coalesce(
               (SELECT l.owner <> %(owner)b AND l.holder <> '' AND l.expires_at > clock.now
                  FROM {thread_leases} AS l WHERE l.thread_id = %(thread_id)b), false)),
       CASE WHEN EXISTS (SELECT 1 FROM took) THEN %(ttl_s)b::float8
            ELSE (SELECT CASE WHEN l.holder = '' THEN 0.0
                              ELSE greatest(0.0, l.expires_at - clock.now) END
                    FROM {thread_leases} AS l WHERE l.thread_id = %(thread_id)b) END,
       (SELECT count(*) FROM {lease_waiters} AS o
         WHERE o.thread_id = %(thread_id)b AND o.waiter <> %(holder)b
           AND o.seen_at > clock.now - %(lapse_s)b::float8
           AND (o.arrived_at, o.waiter)
               < (coalesce((SELECT arrived_at FROM mine), 'infinity'::float8), %(holder)b))"""

#: One acquisition attempt. Params: ``thread_id``, ``owner``, ``holder`` (run id), ``ttl_s``,
#: ``lapse_s``, ``queue`` (register the caller's place when refused, refreshed a few times per
#: ``lapse_s``). Returns one row: the :data:`ACQUIRE_COLUMNS`.
ACQUIRE: LiteralString = (
    "\nWITH " + ACQUIRE_CTES + "\nSELECT " + ACQUIRE_COLUMNS + "\n  FROM clock\n"
)

#: A waiting run's poll, read-only (no row lock, nothing written). Params: ``thread_id``,
#: ``holder``, ``lapse_s``. One row: seconds until the lease lapses (``0``: free), live
#: waiters queued before the caller.
PEEK: LiteralString = """
WITH clock AS (
    SELECT extract(epoch FROM statement_timestamp())::float8 AS now
)
SELECT coalesce((SELECT CASE WHEN l.holder IN ('', %(holder)b) THEN 0.0
                             ELSE greatest(0.0, l.expires_at - clock.now) END
                   FROM {thread_leases} AS l WHERE l.thread_id = %(thread_id)b), 0.0),
       (SELECT count(*) FROM {lease_waiters} AS o
         WHERE o.thread_id = %(thread_id)b AND o.waiter <> %(holder)b
           AND o.seen_at > clock.now - %(lapse_s)b::float8
           AND (o.arrived_at, o.waiter)
               < (coalesce((SELECT w.arrived_at FROM {lease_waiters} AS w
                             WHERE w.thread_id = %(thread_id)b AND w.waiter = %(holder)b),
                           'infinity'::float8), %(holder)b))
  FROM clock
"""

#: Extend the holder's lease. Params: ``thread_id``, ``holder``, ``fence``, ``ttl_s``. A row
#: back: renewed; none: another run took the lease.
RENEW: LiteralString = """
UPDATE {thread_leases}
   SET expires_at = extract(epoch FROM statement_timestamp())::float8 + %(ttl_s)b::float8
 WHERE thread_id = %(thread_id)b AND holder = %(holder)b AND fence = %(fence)b::int8
RETURNING fence
"""

#: Give the lease up (when ``fence`` is still current) and leave the queue. Params:
#: ``thread_id``, ``holder``, ``fence`` (-1: only leave the queue; fences start at 1).
RELEASE: LiteralString = (
    """
WITH released AS (
    UPDATE {thread_leases} AS lease
       SET holder = '', expires_at = 0,
           settled_version = coalesce(
               (SELECT t.version FROM {threads} AS t WHERE t.thread_id = %(thread_id)b), 0)
     WHERE thread_id = %(thread_id)b AND holder = %(holder)b AND fence = %(fence)b::int8
 RETURNING """
    + WAKE
    + """
), left_queue AS (
    DELETE FROM {lease_waiters} WHERE thread_id = %(thread_id)b AND waiter = %(holder)b
)
SELECT count(*) FROM released
"""
)

#: ``AND`` term of a checkpoint write (``%(fence)b`` -1, ``_sql.NO_FENCE``: no lease, the CAS
#: alone decides; typed, never NULL, like every parameter of the hot statements).
FENCE_CONDITION: LiteralString = """(%(fence)b::int8 < 0 OR EXISTS (
           SELECT 1 FROM {thread_leases} AS lease
            WHERE lease.thread_id = %(thread_id)b AND lease.fence = %(fence)b::int8
              FOR SHARE))"""

#: CTE appended to ``CHECKPOINT_CAS`` and ``CHECKPOINT_CREATE`` (after ``cas``): the last write
#: of a run releases its lease in the same statement (``%(release)b``).
RELEASE_CTE: LiteralString = (
    """released AS (
    UPDATE {thread_leases} AS lease
       SET holder = '', expires_at = 0, settled_version = cas.version
      FROM cas
     WHERE lease.thread_id = %(thread_id)b AND lease.fence = %(fence)b::int8
       AND %(release)b::bool
 RETURNING """
    + WAKE
    + """
)"""
)
