"""The run lease seen from the runtime: multitask strategies, waiting, renewal, release.

DESIGN section 3, "One run per thread at a time, on request"; the user's view is on the "Run
lease and multitask strategies" page of the docs (docs/how-to/run-lease.md). The store keeps the lease
(a holder, a fencing token, an expiry) and the queue of waiting runs; this module decides what a
run does with it:

* ``reject``: one attempt; refused -> :class:`ThreadBusyError` before any node runs.
* ``enqueue``: queue and retry until granted (arrival order) or ``enqueue_timeout_s``.
* ``interrupt``: as ``enqueue``, after asking the holder to stop at its next node boundary (the
  durable stop request of ``stop()``); the stopped run is not resumed by the new one.
* ``rollback``: as ``interrupt``, then the stopped run's checkpoints are dropped from the
  current state (a new version holding the state from before it; history keeps them).
* resumes (any strategy, ``None`` included): wait for the lease as ``enqueue`` does, so two
  racing resumers run the paused node once and a resume after a crash waits for the lapse.

While held, the lease is renewed every ``lease_renew_s`` seconds by a task on the run's event
loop (asyncio; under trio the lease is renewed at each checkpoint only, so a node longer than
``lease_ttl_s`` lets it lapse). The run's last checkpoint write releases it in the same
statement; otherwise :meth:`RunLease.release` sends a release when the run ends.

Taking the lease costs no round trip of its own: every acquisition attempt is the run's first
read with the acquisition folded in (``BaseCheckpointer.aload_leased``; on Postgres one
statement, ``LEASE_READ``), and the run's last checkpoint write releases it.

The runner calls this module at three marked points (``# -- run lease:`` comments in
:mod:`tenxgraph.core._runner`): as the first read, after an unleased first read (resumes), and
at the end of the run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import sniffio

from tenxgraph.core.exceptions import ConfigError, TenxGraphError, ThreadBusyError, lease_lost
from tenxgraph.core.state.execution import ExecutionStatus

if TYPE_CHECKING:
    from tenxgraph.core.state import AgentState
    from tenxgraph.records import Loaded, ThreadKey
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer

__all__ = [
    "POLL_HEAD_S",
    "POLL_MAX_S",
    "POLL_MIN_S",
    "RunLease",
    "rollback_target",
    "strategy_of",
]

log = logging.getLogger("tenxgraph.lease")

#: First and longest pause (seconds) between two attempts of a waiting run. Each attempt also
#: keeps the waiter's place in the queue alive (a place lapses after ``lease_ttl_s``).
POLL_MIN_S = 0.005
POLL_MAX_S = 0.1
#: Pause (seconds) of the waiter at the head of the queue: it takes the lease within this
#: long of its release (the others back off up to ``POLL_MAX_S``).
POLL_HEAD_S = 0.004

#: Seconds a woken-up waiter adds to the holder's remaining lease before trying anyway (a
#: holder that crashed sends no release: its lease lapses on the server's clock).
WAKE_MARGIN_S = 0.05

#: Seconds given to a release sent while the run is being cancelled or closed.
RELEASE_BUDGET_S = 5.0


def strategy_of(config: dict[str, Any], cp: BaseCheckpointer[Any]) -> str | None:
    """The run's strategy: ``config["multitask_strategy"]``, else the checkpointer's default.

    Raises:
        ConfigError: ``CONFIG_001`` when a strategy is asked of a checkpointer of the
            application's own (no built-in store to keep a lease in).
    """
    strategy = config.get("multitask_strategy") or getattr(cp, "multitask_strategy", None)
    if strategy is not None and cp.store is None:
        raise ConfigError(
            f"multitask_strategy={strategy!r} needs a built-in store (InMemoryCheckpointer, "
            f"SqliteCheckpointer or PgCheckpointer); {type(cp).__name__} keeps no run lease",
            context={"key": "multitask_strategy"},
        )
    return strategy


class RunLease:
    """The lease one run holds (or waits for) on its thread.

    Args:
        cp: the graph's checkpointer (with a built-in store).
        config: the run's validated config.
        key: the run's thread key.
        holder: the run id (identifies the holder and the waiter).

    Attributes:
        fence: the fencing token while held, else ``None``.
        stop_requested: this run asked the previous holder to stop (``interrupt``,
            ``rollback``) and was then granted the lease.
        waited_s: seconds spent waiting for the lease.
    """

    def __init__(
        self, cp: BaseCheckpointer[Any], config: dict[str, Any], key: ThreadKey, holder: str
    ) -> None:
        self.cp = cp
        self.config = config
        self.key = key
        self.holder = holder
        self.fence: int | None = None
        self.stop_requested = False
        self.waited_s = 0.0
        self.lost = False
        #: a statement committed durably since the grant (a checkpoint write or a renewal)
        self.durable = False
        self._renewer: asyncio.Task[None] | None = None
        self._renewed_at = 0.0

    # -- taking ----------------------------------------------------------------------------------
    async def take(self, strategy: str, state_cls: type[AgentState]) -> Loaded | None:
        """Take the lease as ``strategy`` says (``"resume"``: wait, as for a resume) and read
        the thread under it: each acquisition attempt is folded into the run's first read
        (``BaseCheckpointer.aload_leased``: one round trip on Postgres), so the attempt that
        is granted also returns the thread.

        Args:
            strategy: ``reject``, ``enqueue``, ``interrupt``, ``rollback`` or ``resume``.
            state_cls: the class to decode the thread's state with.

        Returns:
            The thread's latest version read under the lease (``None``: no thread yet).

        Raises:
            ThreadBusyError: ``STORAGE_BUSY_001``: refused (``reject``) or waited longer than
                ``enqueue_timeout_s``. Nothing was written.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        cp = self.cp
        # A run of a process whose lease listener is up registers before its first attempt,
        # so that a release right after that attempt still wakes it (no connection opened
        # here: a process that never waits never listens).
        waiter = None
        if strategy != "reject":
            waiter = await cp.alease_waiter(self.config, self.holder, start=False)
        listening = waiter is not None
        try:
            # The store's expiry counts from when it granted, which is after the request was
            # sent: the in-process lease deadline (check_held) counts from the send.
            sent = time.monotonic()
            grant, loaded = await cp.aload_leased(
                self.config, self.holder, queue=strategy != "reject", state_cls=state_cls
            )
            if grant.fence is None and strategy == "reject":
                raise await self._busy(strategy, grant.expires_in_s, waited=None)
            t0 = time.monotonic()
            deadline = None if cp.enqueue_timeout_s is None else t0 + cp.enqueue_timeout_s
            delay = POLL_MIN_S
            asked_stop = False
            refreshed = t0
            try:
                while grant.fence is None:
                    if strategy in ("interrupt", "rollback") and not asked_stop:
                        # The durable stop request of stop(): the holder stops at its next node
                        # boundary (within STOP_POLL_S when it runs in another process).
                        await cp.aset_stop(self.config, True)
                        asked_stop = True
                    now = time.monotonic()
                    if deadline is not None and now >= deadline:
                        raise await self._busy(strategy, grant.expires_in_s, waited=now - t0)
                    late = not listening
                    if late:
                        # First wait of this process: open the listener. A release may have
                        # come between the refused attempt and now: try once more at once.
                        listening = True
                        waiter = await cp.alease_waiter(self.config, self.holder, start=True)
                    if waiter is not None and waiter.live:
                        if not late:
                            # Woken by the release; else try anyway when the holder's lease
                            # may have lapsed (a crashed holder sends no release) or when the
                            # place in the queue is due for a refresh.
                            pause = cp.lease_ttl_s / 4
                            if grant.expires_in_s:
                                pause = min(pause, grant.expires_in_s + WAKE_MARGIN_S)
                            if deadline is not None:
                                pause = min(pause, max(0.0, deadline - now))
                            await waiter.wait(pause)
                        refreshed = sent = time.monotonic()
                        grant, loaded = await cp.aload_leased(
                            self.config, self.holder, queue=True, state_cls=state_cls
                        )
                        continue
                    # No wake-ups (SQLite, memory, a store behind a pooler without listen_dsn,
                    # or the listening connection is down): bounded polling with backoff.
                    pause = POLL_HEAD_S if grant.ahead == 0 else delay
                    if deadline is not None:
                        pause = min(pause, max(0.0, deadline - now))
                    await anyio.sleep(pause)
                    delay = min(delay * 2, POLL_MAX_S)
                    # A read-only peek unless the lease looks free to this run or its place in
                    # the queue is due for a refresh: no row lock taken against the holder's
                    # writes.
                    if time.monotonic() - refreshed < cp.lease_ttl_s / 4:
                        peeked = await cp.alease_peek(self.config, self.holder)
                        if not (peeked.expires_in_s == 0.0 and peeked.ahead == 0):
                            grant = peeked
                            continue
                    refreshed = sent = time.monotonic()
                    grant, loaded = await cp.aload_leased(
                        self.config, self.holder, queue=True, state_cls=state_cls
                    )
            except BaseException:
                # Leave the queue (and withdraw a stop request made for this run) first.
                with anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_BUDGET_S):
                    try:
                        await cp.alease_release(self.config, self.holder, None)
                        if asked_stop:
                            await cp.aset_stop(self.config, False)
                    except Exception as exc:  # noqa: BLE001 - the original error matters
                        log.warning("could not leave the queue of a thread: %s", type(exc).__name__)
                raise
        finally:
            if waiter is not None:
                waiter.close()
        self.waited_s = time.monotonic() - t0
        self._renewed_at = sent
        self.fence = grant.fence
        if asked_stop:
            # The previous holder stopped (or ended): withdraw the request so that this run
            # does not stop at its own first boundary.
            await cp.aset_stop(self.config, False)
            self.stop_requested = True
        self._start_renewal()
        return loaded

    async def _busy(
        self, strategy: str, expires_in_s: float | None, waited: float | None
    ) -> ThreadBusyError:
        """The error of a refused or timed-out run (reads the thread's version for its
        context: one round trip, on the error path only)."""
        try:
            info = await self.cp.aget_thread(self.config)
            version: int | None = info.version if info is not None else 0
        except TenxGraphError:
            version = None
        tid = self.key.thread_id
        if waited is None:
            msg = (
                f"thread {tid!r} is busy: another run holds it (multitask_strategy 'reject'); "
                "nothing of this run ran or was written. Call again later, or use 'enqueue' "
                "to wait for it"
            )
        else:
            msg = (
                f"thread {tid!r} stayed busy for {waited:.1f} s, past enqueue_timeout_s="
                f"{self.cp.enqueue_timeout_s} (multitask_strategy {strategy!r}); nothing of "
                "this run ran or was written. Call again, or raise the checkpointer's "
                "enqueue_timeout_s"
            )
        context: dict[str, Any] = {
            "thread_id": tid,
            "expected_version": version,
            "current_version": version,
            "lease_expires_in_s": expires_in_s,
            "strategy": strategy,
        }
        if waited is not None:
            context["waited_s"] = round(waited, 3)
        return ThreadBusyError(msg, context=context)

    # -- holding ---------------------------------------------------------------------------------
    def _start_renewal(self) -> None:
        try:
            backend = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            backend = ""
        if backend != "asyncio":
            return  # trio: renewed at each checkpoint only (see the module docstring)
        self._renewer = asyncio.get_running_loop().create_task(self._renew_loop())

    async def _renew_loop(self) -> None:
        fence = self.fence
        assert fence is not None
        while True:
            await asyncio.sleep(self.cp.lease_renew_s)
            sent = time.monotonic()
            try:
                ok = await self.cp.alease_renew(self.config, self.holder, fence)
            except TenxGraphError as exc:
                log.warning("could not renew a run lease: %s", exc.error_code)
                continue
            if ok:
                self._renewed_at = max(self._renewed_at, sent)
                self.durable = True
            else:
                # Another run took the thread over; this run's next checkpoint is refused.
                self.lost = True
                log.warning("a run lost its lease on a thread (it lapsed and was taken over)")
                return

    async def renew_now(self) -> None:
        """Renew when due (the trio path: called at each checkpoint when no task renews; a
        renewal is sent only once ``lease_renew_s`` passed since the last one)."""
        if self._renewer is not None or self.fence is None or self.lost:
            return
        now = time.monotonic()
        if now - self._renewed_at >= self.cp.lease_renew_s:
            self._renewed_at = now
            self.lost = not await self.cp.alease_renew(self.config, self.holder, self.fence)

    async def check_held(self, expected_version: int) -> int | None:
        """Confirm, before a side effect, that this run still holds its lease.

        Free while the last confirmed grant or renewal is recent: the store's expiry is at
        least ``lease_ttl_s`` after the moment the renewal was sent, so within
        ``min(lease_ttl_s / 2, lease_ttl_s - lease_renew_s)`` of it (the margin covers clock
        rate and network delay) no other run can hold the thread. Past that (the process was
        paused, renewals failed) it renews now, one round trip, and refuses if that fails.
        It also renews before the first side effect of a run that has committed nothing
        since the grant: Postgres commits a grant without waiting for its WAL flush, and a
        server crash may forget it; the renewal's commit is flushed, and with it the grant
        (docs/guarantees.md, "Run lease durability").

        Args:
            expected_version: the version this run last read or wrote (for the error).

        Returns:
            The fencing token (``None`` when the run holds no lease: nothing to check).

        Raises:
            StaleStateError: ``STORAGE_CONFLICT_000`` with ``context["fence"]`` when the lease
                lapsed and was taken over (or cannot be confirmed): nothing may run.
        """
        fence = self.fence
        if fence is None:
            return None
        cp = self.cp
        if not self.lost:
            now = time.monotonic()
            window = min(cp.lease_ttl_s / 2, cp.lease_ttl_s - cp.lease_renew_s)
            if now - self._renewed_at < window and self.durable:
                return fence
            try:
                ok = await cp.alease_renew(self.config, self.holder, fence)
            except TenxGraphError as exc:
                log.warning("could not confirm a run lease before a tool call: %s", exc.error_code)
                ok = False
            if ok:
                self._renewed_at = max(self._renewed_at, now)
                self.durable = True
                return fence
            self.lost = True
        raise lease_lost(self.key.thread_id, expected_version, fence)

    # -- releasing -------------------------------------------------------------------------------
    def wrote(self) -> None:
        """A checkpoint write under the lease committed (durably: the grant before it is
        durable too)."""
        self.durable = True

    def released_by_write(self) -> None:
        """The run's last checkpoint write released the lease (folded release)."""
        self._stop_renewal()
        self.fence = None

    def _stop_renewal(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None

    async def release(self) -> None:
        """Give the lease up when the last write did not (best effort, shielded: also while
        the run is being cancelled)."""
        self._stop_renewal()
        fence, self.fence = self.fence, None
        if fence is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_BUDGET_S):
            try:
                await self.cp.alease_release(self.config, self.holder, fence)
            except Exception as exc:  # noqa: BLE001 - the lease lapses by itself
                log.warning("could not release a run lease: %s", type(exc).__name__)


async def rollback_target(
    cp: BaseCheckpointer[Any],
    config: dict[str, Any],
    state: AgentState,
    state_cls: type[AgentState],
    fresh: Callable[[], AgentState],
) -> AgentState | None:
    """The state to restore for ``rollback``: the newest kept version written by another run
    than the stopped one (``state.execution_meta.run_id``).

    Args:
        cp: the checkpointer.
        config: the new run's config (its thread).
        state: the thread's current state, as the stopped run left it.
        state_cls: the class to decode kept versions with.
        fresh: builds the state of a new thread (when the stopped run started the thread).

    Returns:
        That state; ``None`` when nothing is to be dropped (the last run finished) or when the
        stopped run's starting point is no longer kept (``state_history_limit``); the caller
        then goes on as ``interrupt`` does.
    """
    meta = state.execution_meta
    stopped = meta.run_id
    if meta.status not in (ExecutionStatus.STOPPED, ExecutionStatus.RUNNING) or not stopped:
        return None
    before: int | None = None
    while True:
        # A copy: the history read records the head it saw, and the run's pin must not move.
        page = await cp.aget_state_history(
            dict(config), limit=16, before=before, state_cls=state_cls
        )
        if not page:
            break
        for snap in page:
            if snap.state.execution_meta.run_id != stopped:
                return snap.state
            if snap.version == 1:
                # The stopped run started the thread: roll back to an empty thread.
                return fresh()
        before = page[-1].version
    log.warning(
        "rollback: the state before the stopped run is no longer kept (state_history_limit); "
        "going on from where it stopped, as 'interrupt' does"
    )
    return None
