"""The recovery loop: run submitted runs and finish cut-off ones, exactly once across workers.

DESIGN section 8 ("Recovery"); the user's view is docs/how-to/background-runs.md. One
:class:`Recovery` per process (``async with app.recovery(...)``, or the ``tenxgraph worker``
process of :mod:`tenxgraph.worker`) does, until it is closed:

1. **Learn of work.** A sweep lists the open runs (``pending``, ``running``; oldest first) every
   ``sweep_interval_s`` seconds; on Postgres a listening connection (``LISTEN`` on the runs
   channel; ``NOTIFY`` is sent by a submit and when a worker ends a run, which releases its
   thread) wakes it at once. No other polling.
2. **Claim.** For the oldest open run of each thread not busy in this process: one acquisition
   of the thread's run lease (:mod:`tenxgraph.core._lease`) for a holder id unique to this
   attempt, without queueing. It is granted only when nobody holds the thread: a ``running``
   run whose worker is alive keeps its lease (renewed every ``lease_renew_s``), one whose
   worker died lapses after ``lease_ttl_s``. Then a compare-and-swap of the run's row
   (``status``, ``attempts``) records the attempt; of two workers racing for a run, the lease
   lets one through and the row's CAS would stop a second.
3. **Poison.** A run found ``running`` at its claim was cut off (its worker died: SIGKILL,
   OOM, power). Each claim notes in the attempt's holder id the thread's node count
   (``execution_meta.step``) and whether the attempt runs alone in its worker. At the next
   claim, a cut-off attempt that checkpointed a node since its claim made progress: ``crashes``
   goes back to 0 (its worker's death was not its doing). One without progress that ran alone
   is counted in ``crashes``. One without progress that shared its dead worker with other runs
   is not counted (the culprit is unknown); after two such deaths in a row the run runs alone
   until it makes progress (its worker takes no other run meanwhile; it is claimed by a worker
   with nothing in flight, and after waiting ``ALONE_DRAIN_AFTER_S`` (10 s) a busy worker
   stops taking new runs until it is idle), so that a death is attributed. At
   ``max_crashes`` (default 3) counted crashes in a row the run is marked ``error`` with the
   last failure instead of being started again. A run that makes progress at every attempt is
   never marked.
4. **Run.** ``ainvoke`` with the run's stored input and config, ``run_id`` the run's id, the
   lease holder the claim's (config key ``_lease_holder``: the runner's first read takes the
   lease it already holds, in the same round trip). A recovered run whose input is made of
   messages alone sends it again: the runtime recognises the turn (docs/idempotent-turns.md),
   finishes the cut-off run from its last checkpoint (replaying at most the node that was
   running; the ledger answers recorded tool calls) and returns the whole turn's answer. Any
   other run on its second or later attempt resumes with ``ainvoke(None)`` when its first
   checkpoint was written (the thread's ``execution_meta.run_id`` is the run's), else starts
   again.
5. **Record.** The final status (``completed``; ``interrupted`` for a pause, which waits for its
   resume; ``cancelled`` after ``astop``; ``error`` when a node raised) and the result, with a
   ``NOTIFY``. A retryable storage failure leaves the run ``running`` for the next claim
   (counted as a crash unless it made progress). Closing the recovery first stops taking runs
   and lets the attempts in flight finish for up to ``grace_s`` seconds (their leases renewed
   as usual, so a tool running in a worker thread ends and is recorded before anything else
   can run the run); only the attempts still going after that are cancelled and put back to
   ``pending`` (not counted).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import socket
import time
import uuid
from typing import TYPE_CHECKING, Any, Self

import anyio
from anyio.abc import TaskGroup

from tenxgraph.core import runs as _runs
from tenxgraph.core.exceptions import ConfigError, StorageError, TenxGraphError
from tenxgraph.core.state.execution import ExecutionStatus
from tenxgraph.records import ThreadKey
from tenxgraph.run_records import RunRecord
from tenxgraph.telemetry import ATTR, METRIC, SPAN, counter, histogram, span
from tenxgraph.utils.constants import ResponseGranularity

if TYPE_CHECKING:
    from tenxgraph.core.graph.compiled_graph import CompiledGraph
    from tenxgraph.storage.runs import RunStore

__all__ = ["Recovery"]

log = logging.getLogger("tenxgraph.recovery")

#: Seconds between two attempts to open the listening connection again after it broke.
LISTEN_RETRY_S = 1.0
#: Seconds given to putting a run back to ``pending`` while the recovery closes.
SHUTDOWN_BUDGET_S = 5.0
#: Cut-off attempts in a row without progress, beside other runs, after which a run runs
#: alone (a random kill rarely hits the same run twice in a row before its first node ends).
SHARED_DEATHS_TO_ISOLATE = 2
#: Seconds a run to be run alone waits for an idle worker before a busy worker stops taking
#: new runs to become idle for it.
ALONE_DRAIN_AFTER_S = 10.0
#: Default seconds a closing recovery lets its attempts in flight finish.
DEFAULT_GRACE_S = 30.0
#: The keyword options of :class:`Recovery` (``CompiledGraph.recovery`` checks against them).
RECOVERY_OPTIONS = (
    "concurrency",
    "sweep_interval_s",
    "max_crashes",
    "worker_id",
    "listen",
    "listen_dsn",
    "grace_s",
    "retention_interval_s",
)

#: Default seconds between two retention sweeps of the recovery loop.
DEFAULT_RETENTION_INTERVAL_S = 60.0


def _holder_note(holder: str) -> tuple[int | None, int, bool]:
    """What a claim noted in its attempt's holder id (``run#attempt#sN.U[a]#random``): the
    thread's node count ``N`` at the claim (``None`` when not noted), the run's cut-off
    attempts in a row before it that were not counted (``U``: without progress, beside other
    runs), and whether the attempt ran alone in its worker (``a``; ``True`` when not noted:
    such a death is counted)."""
    parts = holder.split("#")
    if len(parts) == 4 and parts[2].startswith("s"):
        note = parts[2][1:]
        alone = note.endswith("a")
        step, _, shared = (note[:-1] if alone else note).partition(".")
        if step.isdigit() and shared.isdigit():
            return int(step), int(shared), alone
    return None, 0, True


def _error_text(exc: BaseException, sealed: bool = False) -> str:
    """``runs.last_error`` of a failed run: ``"<code>: <message>"``. Under a cipher
    (``sealed``) the message is left out: errors often quote the content they failed on, and
    ``last_error`` is stored in clear (docs/how-to/encryption.md)."""
    code = getattr(exc, "error_code", None) or type(exc).__name__
    if sealed:
        return f"{code}: {type(exc).__name__} (message withheld: the store is encrypted)"
    message = exc.message if isinstance(exc, TenxGraphError) else str(exc)
    return f"{code}: {message}"[:2000]


def _messages_only(inp: dict[str, Any] | None) -> bool:
    return bool(inp) and set(inp or ()) == {"messages"} and bool((inp or {})["messages"])


class Recovery:
    """Runs submitted runs and recovers cut-off ones (see the module docstring).

    Args:
        app: the compiled graph whose store holds the runs (a built-in store).
        concurrency: runs this process executes at once (``>= 1``).
        sweep_interval_s: seconds between two sweeps for open runs (``> 0``); a lapsed lease
            is found within this long of lapsing.
        max_crashes: attempts in a row cut off by their worker's death after which a run is
            marked ``error`` (``>= 1``, default 3).
        worker_id: this worker's name in the runs' rows (default ``host:pid:random``).
        listen: on Postgres, open a ``LISTEN`` connection to be woken by submits and
            releases (``False``: sweep only).
        listen_dsn: the DSN of that connection when the store's own goes through PgBouncer in
            transaction mode (``LISTEN`` needs a direct or session-mode connection).
        grace_s: seconds a closing recovery lets its attempts in flight finish before it
            cancels them and puts their runs back to ``pending`` (``>= 0``, default 30).
        retention_interval_s: seconds between two retention sweeps
            (``checkpointer.asweep_threads()``: threads idle longer than their TTL are
            deleted; see docs/how-to/erasure-retention.md), the first one at start; ``None``:
            no retention sweep in this process (default 60).

    Raises:
        ConfigError: ``CONFIG_001`` for a bad argument, or when the checkpointer has no
            built-in store.
    """

    def __init__(
        self,
        app: CompiledGraph[Any],
        *,
        concurrency: int = 4,
        sweep_interval_s: float = 1.0,
        max_crashes: int = 3,
        worker_id: str | None = None,
        listen: bool = True,
        listen_dsn: str | None = None,
        grace_s: float = DEFAULT_GRACE_S,
        retention_interval_s: float | None = DEFAULT_RETENTION_INTERVAL_S,
    ) -> None:
        for name, value, low in (
            ("concurrency", concurrency, 1),
            ("max_crashes", max_crashes, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(
                    f"{name} must be an int >= {low}, not {value!r}", context={"key": name}
                )
        if (
            not isinstance(grace_s, int | float)
            or isinstance(grace_s, bool)
            or not 0 <= grace_s < float("inf")
        ):
            raise ConfigError(
                f"grace_s must be a finite number of seconds >= 0, not {grace_s!r}",
                context={"key": "grace_s"},
            )
        if not isinstance(sweep_interval_s, int | float) or not sweep_interval_s > 0:
            raise ConfigError(
                f"sweep_interval_s must be a number of seconds > 0, not {sweep_interval_s!r}",
                context={"key": "sweep_interval_s"},
            )
        if retention_interval_s is not None and (
            isinstance(retention_interval_s, bool)
            or not isinstance(retention_interval_s, int | float)
            or not 0 < retention_interval_s < float("inf")
        ):
            raise ConfigError(
                "retention_interval_s must be a finite number of seconds > 0 or None, not "
                f"{retention_interval_s!r}",
                context={"key": "retention_interval_s"},
            )
        self.retention_interval_s = (
            None if retention_interval_s is None else float(retention_interval_s)
        )
        self.app = app
        self.store: RunStore = _runs.run_store(app)
        self.concurrency = concurrency
        self.sweep_interval_s = float(sweep_interval_s)
        self.max_crashes = max_crashes
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.listen = listen
        self.listen_dsn = listen_dsn
        self.grace_s = float(grace_s)
        #: counts of this process: ``started``, ``recovered``, ``completed``, ``interrupted``,
        #: ``cancelled``, ``error``, ``poisoned``, ``requeued``, ``sweeps``, ``notifications``
        self.stats: dict[str, int] = dict.fromkeys(
            (
                "started",
                "recovered",
                "completed",
                "interrupted",
                "cancelled",
                "error",
                "poisoned",
                "requeued",
                "sweeps",
                "notifications",
                "retention_sweeps",
                "threads_expired",
            ),
            0,
        )
        self._busy: set[str] = set()  # thread ids with an attempt in this process
        self._alone: str | None = None  # the thread whose run runs alone here, if any
        self._want_alone = False  # a run waits to run alone: take nothing new until idle
        self._asked: dict[str, float] = {}  # run id -> monotonic time its live lease was asked
        self._wake = anyio.Event()
        self._tg: TaskGroup | None = None
        self._intake = anyio.CancelScope()  # the sweep and listen loops: cancelled first
        self._ended = anyio.Event()  # set each time an attempt ends

    # -- lifecycle -------------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        await self.app.checkpointer._ensure_setup()  # noqa: SLF001 - the lazy setup of every call
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._intake = anyio.CancelScope()
        self._tg.start_soon(self._intake_loops)
        return self

    async def _intake_loops(self) -> None:
        with self._intake:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._sweep_loop)
                if self.retention_interval_s is not None:
                    tg.start_soon(self._retention_loop)
                store = self.app.checkpointer.store
                if self.listen and callable(getattr(store, "run_listen", None)):
                    tg.start_soon(self._listen_loop)

    async def __aexit__(self, *exc: object) -> None:
        tg, self._tg = self._tg, None
        if tg is None:
            return
        # Take no more runs; let the attempts in flight finish (a sync tool cannot be stopped
        # in its thread: cancelling it would requeue a run whose side effect is still coming).
        self._intake.cancel()
        if self._busy and self.grace_s > 0:
            with anyio.move_on_after(self.grace_s):
                while self._busy:
                    self._ended = anyio.Event()
                    await self._ended.wait()
            if self._busy:
                log.warning(
                    "%d background run(s) still running after grace_s=%s; putting them back "
                    "to pending",
                    len(self._busy),
                    self.grace_s,
                )
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)

    def wake(self) -> None:
        """Sweep now (also called by the listener on each notification)."""
        self._wake.set()

    # -- learning of work ------------------------------------------------------------------------
    async def _sweep_loop(self) -> None:
        while True:
            self._wake = anyio.Event()
            try:
                await self.sweep()
            except TenxGraphError as exc:
                log.warning("recovery sweep failed: %s", exc.error_code)
            with anyio.move_on_after(self.sweep_interval_s):
                await self._wake.wait()

    async def _retention_loop(self) -> None:
        """Every ``retention_interval_s``: delete the threads idle longer than their TTL
        (``checkpointer.asweep_threads``). A failing sweep is logged and tried again at the
        next interval."""
        assert self.retention_interval_s is not None
        while True:
            try:
                result = await self.app.checkpointer.asweep_threads()
            except TenxGraphError as exc:
                log.warning("retention sweep failed: %s", exc.error_code)
            else:
                self.stats["retention_sweeps"] += 1
                self.stats["threads_expired"] += result.threads
            await anyio.sleep(self.retention_interval_s)

    async def _listen_loop(self) -> None:
        store: Any = self.app.checkpointer.store
        while True:
            try:
                conn = await store.run_listen(self.listen_dsn)
            except TenxGraphError as exc:
                log.warning("cannot listen for submitted runs (%s); sweeping only", exc.error_code)
                await anyio.sleep(LISTEN_RETRY_S)
                continue
            try:
                self.wake()  # anything submitted while the connection was down
                async for _ in conn.notifies():
                    self.stats["notifications"] += 1
                    self.wake()
            except Exception as exc:  # noqa: BLE001 - the sweep goes on; listen again
                log.warning("the listening connection broke (%s); reconnecting", type(exc).__name__)
            finally:
                with anyio.CancelScope(shield=True):
                    await conn.close()
            await anyio.sleep(LISTEN_RETRY_S)

    async def sweep(self) -> int:
        """One pass: claim and start the oldest open run of each thread not busy here, up to
        the free slots.

        Returns:
            How many runs this pass started.
        """
        self.stats["sweeps"] += 1
        if self._alone is not None or (self._want_alone and self._busy):
            return 0  # a run runs alone here, or waits for this worker to be idle
        self._want_alone = False
        free = self.concurrency - len(self._busy)
        if free <= 0:
            return 0
        open_runs = await self.store.run_open(max(64, 8 * self.concurrency))
        seen: set[str] = set()
        candidates: list[RunRecord] = []
        now, mono = time.time(), time.monotonic()
        ttl = self.app.checkpointer.lease_ttl_s
        asking = 0
        for rec in open_runs:
            if rec.thread_id in seen:
                continue  # a thread's runs go in submission order: only its oldest is a candidate
            seen.add(rec.thread_id)
            if rec.thread_id in self._busy:
                continue
            if rec.status == "running":
                # Its lease cannot have lapsed within lease_ttl_s of its claim, and a live one
                # is asked about at most once per lease_ttl_s (or sweep interval, the longer)
                # by this worker: each ask is a round trip.
                if now - rec.updated_at < ttl or mono - self._asked.get(rec.run_id, -1e9) < max(
                    self.sweep_interval_s, ttl
                ):
                    continue
                if asking >= 4 * self.concurrency:
                    continue  # the others at a later sweep
                asking += 1
                self._asked[rec.run_id] = mono
            candidates.append(rec)
        if len(self._asked) > 4096:
            self._asked.clear()
        # Cut-off runs first (their callers have waited longest). Workers woken by the same
        # notification start at different places of the pending ones, so that they do not all
        # race for the same oldest runs.
        cut_off = [r for r in candidates if r.status == "running"]
        pending = [r for r in candidates if r.status != "running"]
        if pending:
            cut = random.randrange(len(pending))
            pending = pending[cut:] + pending[:cut]
        candidates = cut_off + pending
        # Claims of one pass run concurrently (two round trips each), a batch of the free
        # slots at a time, until the slots are full or the candidates run out.
        started = 0
        while candidates and started < free:
            batch, candidates = candidates[: free - started], candidates[free - started :]
            won: list[RunRecord] = []
            async with anyio.create_task_group() as tg:
                for rec in batch:
                    tg.start_soon(self._claim_into, rec, won)
            started += len(won)
        return started

    # -- claiming --------------------------------------------------------------------------------
    async def _claim_into(self, rec: RunRecord, won: list[RunRecord]) -> None:
        """Claim ``rec``, appending it to ``won`` when granted (a failure is logged: the next
        sweep tries again)."""
        try:
            if await self._claim(rec) is not None:
                won.append(rec)
        except TenxGraphError as exc:
            log.warning("could not claim background run %s: %s", rec.run_id, exc.error_code)

    async def _claim(self, rec: RunRecord) -> RunRecord | None:
        cp = self.app.checkpointer
        key = ThreadKey(rec.thread_id, rec.owner)
        step = await self._thread_step(rec)
        crashed = rec.status == "running"
        crashes = rec.crashes
        alone_needed = False
        shared = 0
        if crashed:
            before, shared_before, was_alone = _holder_note(rec.holder)
            if before is not None and step > before:
                # The cut-off attempt checkpointed a node: it made progress, and its worker's
                # death (a neighbour's poison, a random kill) was not its doing.
                crashes = 0
            elif was_alone:
                # No progress and nothing else in flight: its own death. Still suspect: alone.
                crashes = rec.crashes + 1
                alone_needed = self.concurrency > 1
            else:
                # No progress, but other runs were in flight on the dead worker: the death is
                # not attributable, and not counted. The second such death in a row makes the
                # run suspect: it runs alone until it makes progress.
                shared = shared_before + 1
                alone_needed = self.concurrency > 1 and shared >= SHARED_DEATHS_TO_ISOLATE
        alone = self.concurrency == 1 or alone_needed
        note = f"s{step}.{shared}{'a' if alone else ''}"
        holder = f"{rec.run_id}#{rec.attempts + 1}#{note}#{uuid.uuid4().hex[:8]}"
        store: Any = cp.store
        try:
            grant = await store.lease_acquire(
                key, holder, ttl_s=cp.lease_ttl_s, lapse_s=cp.lease_ttl_s, queue=False
            )
        except StorageError as exc:
            if exc.error_code != "STORAGE_FORBIDDEN_001":
                raise
            await self._finish(rec, "error", last_error=self._error_text(exc))
            return None
        if grant.fence is None:
            return None  # a live holder: running elsewhere, or another run of the thread
        now = time.time()
        if crashed and crashes >= self.max_crashes:
            reason = (
                f"poison run: its worker ({rec.worker or 'unknown'}) was cut off {crashes} "
                f"times in a row while running it, without progress (max_crashes={self.max_crashes}); last "
                f"failure: {rec.last_error or 'the worker died (its lease lapsed)'}"
            )
            if await self._finish(
                dataclasses.replace(rec, crashes=crashes), "error", last_error=reason
            ):
                self.stats["poisoned"] += 1
                counter(METRIC.RUNS_POISONED).add(1)
                log.error("background run %s marked error after %d crashes", rec.run_id, crashes)
            await store.lease_release(key, holder, grant.fence)
            return None
        # Reserve the slot (no await between the checks and the reservation): a run to be run
        # alone waits until nothing else is in flight here, and then nothing else starts.
        if self._alone is not None or (alone_needed and self._busy):
            if alone_needed and now - rec.updated_at > ALONE_DRAIN_AFTER_S:
                self._want_alone = True  # waited long enough: take nothing new until idle
            await store.lease_release(key, holder, grant.fence)
            return None
        if alone_needed:
            self._alone = rec.thread_id
        self._busy.add(rec.thread_id)
        status = "running"
        if crashed and await store.get_stop(key, since=rec.created_at):
            status = "cancelled"  # stopped while cut off: honoured before starting again
        claimed = dataclasses.replace(
            rec,
            status=status,
            attempts=rec.attempts + 1,
            crashes=crashes,
            holder=holder,
            worker=self.worker_id,
            last_error=(
                "the worker running the previous attempt was cut off (its lease lapsed)"
                if crashed
                else rec.last_error
            ),
            updated_at=now,
        )
        moved = await self.store.run_update(
            claimed,
            expect_status=rec.status,
            expect_attempts=rec.attempts,
            notify=status == "cancelled",
        )
        if not moved or status == "cancelled":
            self._release_slot(rec.thread_id)
            await store.lease_release(key, holder, grant.fence)
            if moved:
                self.stats["cancelled"] += 1
            return None
        self.stats["started"] += 1
        if crashed:
            self.stats["recovered"] += 1
            counter(METRIC.RUNS_RECOVERED).add(1)
            histogram(METRIC.RECOVERY_DELAY).record(max(0.0, now - rec.updated_at))
        assert self._tg is not None
        self._tg.start_soon(self._execute, claimed, crashed)
        return claimed

    def _release_slot(self, thread_id: str) -> None:
        self._busy.discard(thread_id)
        if self._alone == thread_id:
            self._alone = None

    async def _thread_step(self, rec: RunRecord) -> int:
        """The node count of ``rec``'s thread (0 before its first checkpoint)."""
        cfg = _runs.decode_config(rec.config)
        state = await self.app.aget_state({"thread_id": rec.thread_id, **cfg})
        return 0 if state is None else int(state.execution_meta.step)

    def _error_text(self, exc: BaseException) -> str:
        return _error_text(exc, sealed=self.app.checkpointer.cipher is not None)

    # -- running ---------------------------------------------------------------------------------
    async def _execute(self, rec: RunRecord, crashed: bool) -> None:
        try:
            with span(
                SPAN.RUN_RECOVER if crashed else SPAN.RUN_EXECUTE,
                attributes={
                    ATTR.THREAD_ID: rec.thread_id,
                    ATTR.RUN_ID: rec.run_id,
                    ATTR.RUN_ATTEMPT: rec.attempts,
                },
            ):
                await self._attempt(rec, crashed)
        finally:
            self._release_slot(rec.thread_id)
            self._ended.set()
            self.wake()  # a slot is free

    async def _attempt(self, rec: RunRecord, crashed: bool) -> None:
        cfg = _runs.decode_config(rec.config)
        cfg["run_id"] = rec.run_id
        cfg["_lease_holder"] = rec.holder
        cfg["multitask_strategy"] = "enqueue"
        try:
            inp = _runs.decode_input(_runs.run_input_bytes(self.app, rec))
        except Exception as exc:  # noqa: BLE001 - a run that cannot be read ends, others go on
            # sealed for another run, under a dropped key, or damaged: retrying cannot help
            log.warning("run %s cannot be read (%s): marked error", rec.run_id, type(exc).__name__)
            await self._finish(rec, "error", last_error=self._error_text(exc))
            return
        app = self.app
        try:
            if rec.attempts > 1 and not _messages_only(inp):
                # An earlier attempt (cut off, or requeued by a closing worker) may have
                # written the run's first checkpoint: then resume it, never apply the input
                # twice.
                state = await app.aget_state(dict(cfg))
                if state is not None and state.execution_meta.run_id == rec.run_id:
                    inp = None
            result = await app.ainvoke(inp, cfg, ResponseGranularity.FULL)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_BUDGET_S):
                back = dataclasses.replace(rec, status="pending", updated_at=time.time())
                if await self.store.run_update(
                    back, expect_status="running", expect_attempts=rec.attempts, notify=True
                ):
                    self.stats["requeued"] += 1
            raise
        except StorageError as exc:
            if exc.error_code in (
                "STORAGE_TRANSIENT_001",
                "STORAGE_CONFLICT_000",
                "STORAGE_BUSY_001",
            ):
                # Left running: the lease is released (or lapses), the next claim counts it.
                log.warning(
                    "background run %s: attempt %d failed (%s); it will be tried again",
                    rec.run_id,
                    rec.attempts,
                    exc.error_code,
                )
                return
            await self._finish(rec, "error", last_error=self._error_text(exc))
            return
        except Exception as exc:  # noqa: BLE001 - a node's own failure ends the run as error
            await self._finish(rec, "error", last_error=self._error_text(exc))
            return
        state = result.get("state")
        status = "completed"
        if result.get("interrupted"):
            status = "interrupted"
        elif state is not None and state.execution_meta.status == ExecutionStatus.STOPPED:
            status = "cancelled"
        await self._finish(rec, status, output=_runs.sealed_output(self.app, rec, result))

    async def _finish(
        self,
        rec: RunRecord,
        status: str,
        *,
        last_error: str | None = None,
        output: bytes | None = None,
    ) -> bool:
        done = dataclasses.replace(
            rec,
            status=status,
            last_error=rec.last_error if last_error is None else last_error,
            output=output,
            crashes=0 if status != "error" else rec.crashes,
            updated_at=time.time(),
        )
        moved = await self.store.run_update(
            done, expect_status=rec.status, expect_attempts=rec.attempts, notify=True
        )
        if moved:
            self.stats[status] = self.stats.get(status, 0) + 1
            counter(METRIC.RUNS_FINISHED).add(1, {ATTR.RUN_STATUS: status})
        return moved
