"""Key rotation of sealed rows (``tenxgraph rotate-keys``, ``BaseCheckpointer.arotate_keys``):
re-seal, under each owner's active key, every stored value still sealed under another key.

The driver here is shared by every source of truth; a store contributes two small methods
(:class:`RotatableStore`): a page of rows after a ``(thread_id, position)`` cursor, with their
owner (``rotate_page``), and a conditional swap of a batch (``rotate_swap``) that replaces a
payload only while its bytes are still the ones read. Why this is safe online:

* Only payload bytes change: no version, seq, range, ``threads`` row or lease is touched, so a
  concurrent run's compare-and-swap (on ``threads.version`` and the lease fence) never sees the
  rotation, and a diff-only write never rewrites a row the rotation reads (rows are immutable
  once written; a pruned row simply matches nothing).
* Both ciphertexts open while the old key stays in the ring: a run reading a row before or
  after the swap gets the same plaintext.
* Postgres: the swap locks with ``SKIP LOCKED`` and never waits for a row a checkpoint write or
  a prune holds, so it cannot form a lock cycle with them; a skipped row is picked up by the
  next pass. SQLite: each batch is one short ``BEGIN IMMEDIATE`` transaction, like any write.
* Background runs (``runs.input``, ``runs.output``): a worker's change is a compare-and-swap
  on ``(status, attempts)``, which a swap never touches; the input is never rewritten after
  the submit (an idempotent re-submit compares the opened plaintexts, not bytes), and an output
  exists only once the run finished (NULL outputs are not rows here; a retry clears it), so no
  write of a run can put back bytes read before a swap. On Postgres the swap skips a run row a
  worker holds, like any other.
* A checkpoint younger than ``min_age_s`` is left for a later pass: a writer whose connection
  broke recognises its own commit by reading the version's sealed values back and comparing
  bytes (``PostgresStore.write``), which a swap in between would defeat.
* Cache copies (LRU, Redis) keep the old ciphertext; it still opens while the old key is in the
  ring, and once the key is dropped a copy that no longer opens is a miss read again from the
  source (``BaseCheckpointer._decode_or_refetch``).

Resumable: every batch commits by itself and a row already under its owner's active key is
skipped (with one :class:`~tenxgraph.storage.crypto.Keyring` the store filters them out in its
query by the envelope header), so a stopped rotation is resumed by running it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from tenxgraph.core.exceptions import DecryptionError
from tenxgraph.storage.crypto import Cipher, Keyring, header_for, key_id_of

__all__ = ["START", "TABLES", "RotatableStore", "RotationReport", "rotate"]

#: The tables holding sealed payloads, in rotation order; ``runs.input`` and ``runs.output``
#: are the two payload columns of the background runs (``runs`` table, sealed for their run by
#: :func:`tenxgraph.storage.crypto.seal_run_payload`: the name is the associated data's table).
TABLES = ("checkpoints", "messages", "tool_executions", "runs.input", "runs.output")

#: Where each table's cursor starts, below every position: ``-1`` before a version or seq,
#: ``""`` before a ledger call key or a run id.
START: dict[str, int | str] = {
    "checkpoints": -1,
    "messages": -1,
    "tool_executions": "",
    "runs.input": "",
    "runs.output": "",
}

#: ``(thread_id, owner, position, payload)``: position is the version, seq, call key or run id
#: (the owner of a run is the run's own ``owner`` column).
Row = tuple[str, str, int | str, bytes]


class RotatableStore(Protocol):
    """What a source of truth offers for rotation (Postgres, SQLite, memory)."""

    async def rotate_page(
        self,
        table: str,
        after: tuple[str, int | str] | None,
        limit: int,
        header: bytes | None,
        older_than: float,
    ) -> list[Row]:
        """Up to ``limit`` rows of ``table`` after the ``(thread_id, position)`` cursor (all
        from the start when ``None``), ordered by it, with the owner of their thread (for
        ``runs.input`` / ``runs.output``: the run's own owner, position its run id, and no row
        for a NULL output); only
        those whose payload does not start with ``header`` (every row when ``None``);
        checkpoints created before ``older_than`` (UNIX seconds) only."""
        ...

    async def rotate_swap(self, table: str, rows: list[tuple[str, int | str, bytes, bytes]]) -> int:
        """Replace each ``(thread_id, position, old, new)`` payload by ``new`` where it still
        is ``old`` (a row another transaction holds may be skipped); the number replaced."""
        ...


@dataclass(slots=True)
class RotationReport:
    """What one rotation did.

    Attributes:
        resealed: rows re-sealed under their owner's active key, per table.
        unchanged: rows whose swap found other bytes or a held lock (picked up by a later
            pass), per table.
        unreadable: rows that did not open (a key missing from the ring, a plain row without
            ``seal_plaintext``, a damaged or moved row): left as they are, per table.
        passes: full passes over the tables.
        deferred: checkpoints younger than ``min_age_s`` still under another key (left for a
            later run: not every row is under the active key yet).
    """

    resealed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    unchanged: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    unreadable: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    passes: int = 0
    deferred: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data (for the CLI's ``--json``)."""
        return {
            "resealed": dict(self.resealed),
            "unchanged": dict(self.unchanged),
            "unreadable": dict(self.unreadable),
            "passes": self.passes,
            "deferred": self.deferred,
        }


def _reseal(
    cipher: Cipher, table: str, row: Row, seal_plaintext: bool
) -> tuple[str, int | str, bytes, bytes] | None:
    """The swap of one row, ``None`` when it is under its owner's active key already.

    Raises:
        DecryptionError: ``STORAGE_CRYPTO_001`` when it does not open.
    """
    tid, owner, pos, blob = row
    ring = cipher.for_user(owner)
    if ring is None:
        raise DecryptionError(
            "no keyring for the owner", context={"table": table, "reason": "unknown_key"}
        )
    kid = key_id_of(blob)
    if kid == ring.active:
        return None
    if kid is None and seal_plaintext:
        plain = bytes(blob)
    else:
        plain = ring.open(blob, table, owner, tid, pos)
    return (tid, pos, blob, ring.seal(plain, table, owner, tid, pos))


async def rotate(
    store: RotatableStore,
    cipher: Cipher,
    *,
    batch: int = 500,
    min_age_s: float = 10.0,
    max_passes: int = 20,
    seal_plaintext: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> RotationReport:
    """Re-seal every row of ``store`` under its owner's active key, in batches.

    Passes are repeated while a pass left rows behind (a row a writer held, or whose bytes
    changed under the swap), up to ``max_passes``. Checkpoints younger than ``min_age_s`` are
    not read at all: they were written while the rotation's keyring was deployed, or are left
    to a later run.

    Args:
        store: the source of truth (see :class:`RotatableStore`).
        cipher: the ring (or per-user rings) holding the active key and every key still in use.
        batch: rows read and swapped per round trip (1 to 100,000).
        min_age_s: checkpoints younger than this many seconds are left alone (a later run
            rotates them); ``0`` rotates everything.
        max_passes: stop after this many passes even if rows were left behind.
        seal_plaintext: also seal rows written without a cipher (enabling encryption on an
            existing store); otherwise they are counted as unreadable.
        progress: called with ``(table, resealed so far in it, rows scanned so far in it)``
            after each batch.

    Returns:
        A :class:`RotationReport`.
    """
    report = RotationReport()
    older = time.time() - min_age_s
    header = header_for(cipher.active) if isinstance(cipher, Keyring) else None
    while report.passes < max_passes:
        report.passes += 1
        behind = 0
        older = time.time() - min_age_s
        for table in TABLES:
            after: tuple[str, int | str] | None = None
            scanned = 0
            while True:
                rows = await store.rotate_page(table, after, batch, header, older)
                if not rows:
                    break
                scanned += len(rows)
                after = (rows[-1][0], rows[-1][2])
                todo = []
                for row in rows:
                    try:
                        swap = _reseal(cipher, table, row, seal_plaintext)
                    except DecryptionError:
                        report.unreadable[table] += 1
                        continue
                    if swap is not None:
                        todo.append(swap)
                done = await store.rotate_swap(table, todo) if todo else 0
                report.resealed[table] += done
                report.unchanged[table] += len(todo) - done
                behind += len(todo) - done
                if progress is not None:
                    progress(table, report.resealed[table], scanned)
                if len(rows) < batch:
                    break
        if behind == 0:
            break
        await anyio.sleep(0.2)  # rows held by a writer or changed under us: another pass
    if min_age_s > 0:
        # the checkpoints the passes did not read (too young) and that still need a re-seal
        now = time.time() + 1.0
        young = await _not_active(store, cipher, header, batch, now)
        report.deferred = max(0, young - await _not_active(store, cipher, header, batch, older))
    return report


async def _not_active(
    store: RotatableStore, cipher: Cipher, header: bytes | None, batch: int, older_than: float
) -> int:
    """How many checkpoints created before ``older_than`` are not under their owner's
    active key (read only)."""
    count = 0
    after: tuple[str, int | str] | None = None
    while True:
        rows = await store.rotate_page("checkpoints", after, batch, header, older_than)
        for _tid, owner, _pos, blob in rows:
            ring = cipher.for_user(owner)
            if ring is None or key_id_of(blob) != ring.active:
                count += 1
        if len(rows) < batch:
            return count
        after = (rows[-1][0], rows[-1][2])
