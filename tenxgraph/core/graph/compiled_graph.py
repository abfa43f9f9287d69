"""``CompiledGraph``: run a graph (async core, thin sync twins)."""

from __future__ import annotations

import copy
import enum
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

import anyio
from pydantic import BaseModel

# The module, not its names: importing tenxgraph.core._runner first imports this package.
from tenxgraph.core import _runner, _timetravel
from tenxgraph.core._portal import iterate_sync, run_sync
from tenxgraph.core.config import normalize_config
from tenxgraph.core.exceptions import ConfigError, ResourceNotFoundError, TenxGraphError
from tenxgraph.core.state import AgentState
from tenxgraph.core.state.reducers import MessageList
from tenxgraph.core.state.stream_chunks import StreamChunk, StreamEvent
from tenxgraph.records import ThreadKey
from tenxgraph.telemetry import METRIC, counter
from tenxgraph.utils.constants import ResponseGranularity

from ._ids import prepare_run_config

_IMMUTABLE = frozenset({str, int, float, bool, bytes, complex, type(None)})
_set = object.__setattr__


def _fresh_copy(value: Any, memo: dict[int, Any]) -> Any:
    """``copy.deepcopy(value, memo)``, faster for the shapes a state has: immutable leaves
    (``str``, numbers, ``None``, enum members) are shared, as ``deepcopy`` shares them; dicts,
    lists and pydantic models (without extra fields or private attributes) are copied here,
    recording each copy in ``memo`` as ``deepcopy`` does (so aliasing is kept); anything else
    goes to ``deepcopy`` with the same ``memo``."""
    t = type(value)
    if t in _IMMUTABLE:
        return value
    found = memo.get(id(value))
    if found is not None:
        return found
    if t is dict:
        d: dict[Any, Any] = {}
        memo[id(value)] = d
        memo.setdefault(id(memo), []).append(value)  # deepcopy's keep-alive convention
        for k, v in value.items():
            d[k if type(k) in _IMMUTABLE else _fresh_copy(k, memo)] = (
                v if type(v) in _IMMUTABLE else _fresh_copy(v, memo)
            )
        return d
    if t is list:
        items: list[Any] = []
        memo[id(value)] = items
        memo.setdefault(id(memo), []).append(value)
        items.extend([_fresh_copy(v, memo) for v in value])
        return items
    if isinstance(value, enum.Enum):
        return value
    if (
        isinstance(value, BaseModel)
        and value.__pydantic_extra__ is None
        and getattr(value, "__pydantic_private__", None) is None
    ):
        cls: type[BaseModel] = t
        copied = cls.__new__(cls)
        memo[id(value)] = copied
        memo.setdefault(id(memo), []).append(value)
        _set(
            copied,
            "__dict__",
            {
                k: v if type(v) in _IMMUTABLE else _fresh_copy(v, memo)
                for k, v in value.__dict__.items()
            },
        )
        _set(copied, "__pydantic_extra__", None)
        _set(copied, "__pydantic_fields_set__", set(value.__pydantic_fields_set__))
        _set(copied, "__pydantic_private__", None)
        return copied
    return copy.deepcopy(value, memo)


if TYPE_CHECKING:
    from tenxgraph.core._lifecycle import LifecycleHooks
    from tenxgraph.core._recovery import Recovery
    from tenxgraph.core.runs import RunInfo
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer, StateSnapshot

    from .state_graph import StateGraph

__all__ = ["CompiledGraph"]

StateT = TypeVar("StateT", bound=AgentState)


class CompiledGraph(Generic[StateT]):
    """A validated graph bound to a checkpointer. Build it with ``StateGraph.compile()``.

    Generic in its state class as in 10xGraph (``CompiledGraph[MyState]`` in annotations).

    Every run reads the thread's latest version, checkpoints after each node with
    compare-and-swap, and returns (or streams) what the run produced. Async methods are the real
    ones; each sync method runs its async twin on tenxgraph's shared event-loop portal and
    refuses (``GraphError GRAPH_007``) when called inside a running event loop.
    """

    def __init__(
        self,
        builder: StateGraph[StateT],
        checkpointer: BaseCheckpointer[Any],
        interrupt_before: list[str],
        interrupt_after: list[str],
        *,
        shutdown_timeout: float = 30.0,
    ) -> None:
        self.builder = builder
        #: makes the thread / run ids of new runs (``None``: uuid4); see ``StateGraph``
        self.id_generator = builder.id_generator
        #: the builder's BackgroundTaskManager, shut down by ``aclose``
        self.task_manager = builder.task_manager
        #: receives each run's events (``compile(publisher=...)``); closed by ``aclose``
        self.publisher = builder._publisher  # noqa: SLF001 - the builder's own attribute
        #: seconds ``aclose`` waits for runs of this graph still in flight
        self.shutdown_timeout = shutdown_timeout
        self._closed = False
        self.checkpointer = checkpointer
        self.state_class: type[AgentState] = builder.state_class
        self.interrupt_before = frozenset(interrupt_before)
        self.interrupt_after = frozenset(interrupt_after)
        self.node_objects = dict(builder.nodes)
        #: what Agents with ``trim_context=True`` show their model (``StateGraph(context_manager=)``)
        self.context_manager = builder.context_manager
        #: callbacks around model and tool calls (``compile(callback_manager=)``), or ``None``
        self.callback_manager: Any = None
        #: where input media is offloaded and references are read (``compile(media_store=)``)
        self.media_store: Any = None
        #: graph lifecycle hooks (``compile(lifecycle_hook=)`` and the callback manager's), or
        #: ``None`` when there are none
        self.lifecycle_hooks: LifecycleHooks | None = None
        #: thread -> UNIX time of the newest in-process stop request (see ``astop``)
        self._local_stops: dict[ThreadKey, float] = {}
        self._running: dict[ThreadKey, int] = {}
        self._counters = counter(
            METRIC.REPLAYED_NODES, "{node}", "nodes replayed after a crash or stop"
        )
        if checkpointer.state_class is AgentState and self.state_class is not AgentState:
            checkpointer.state_class = self.state_class

    # -- helpers ---------------------------------------------------------------------------------
    def new_state(self) -> AgentState:
        """A fresh copy of the builder's initial state for a new thread."""
        state: AgentState = _fresh_copy(self.builder.initial_state, {})
        # ``state`` is this call's own copy: its context is replaced in place (as
        # ``model_copy(update={"context": ...})`` would, without another copy)
        object.__setattr__(state, "context", MessageList(state.context))
        state.__pydantic_fields_set__.add("context")
        return state

    def override_node(self, name: str, func: Any) -> Self:
        """Replace a node of the compiled graph (e.g. with a test double).

        Raises:
            GraphError: ``GRAPH_004`` when no such node exists.
        """
        self.builder.override_node(name, func)
        self.node_objects[name] = self.builder.nodes[name]
        return self

    # -- runs ------------------------------------------------------------------------------------
    async def _drive(
        self,
        input_data: Any,
        config: dict[str, Any] | None,
        granularity: ResponseGranularity,
        stream: bool = True,
    ) -> AsyncGenerator[StreamChunk | _runner.RunResult | None, None]:
        cfg = config if config is not None else {}
        rc = await prepare_run_config(cfg, self.id_generator)
        key = self.checkpointer.key_for(cfg)
        self._closed = False  # a run after aclose() reopens what it needs
        self._running[key] = self._running.get(key, 0) + 1
        try:
            async for chunk in _runner.run_graph(
                self, input_data, cfg, ResponseGranularity(granularity), stream, rc=rc
            ):
                yield chunk
        finally:
            left = self._running.get(key, 1) - 1
            if left <= 0:
                self._running.pop(key, None)
                self._local_stops.pop(key, None)  # a request no run took up targets nothing
            else:
                self._running[key] = left

    async def ainvoke(
        self,
        input_data: dict[str, Any] | None,
        config: dict[str, Any] | None = None,
        response_granularity: ResponseGranularity = ResponseGranularity.LOW,
    ) -> dict[str, Any]:
        """Run the graph on one thread until END, a pause, a stop or an error.

        Args:
            input_data: ``{"messages": [Message, ...]}`` (appended to ``context``), optionally
                ``"state": {field: value}`` (a partial update, each field through its
                reducer; state fields may also be given at the top level), or
                ``{"resume": answer}`` for a thread paused by ``interrupt()``; ``None`` or
                ``{}`` resumes an unfinished run and writes nothing on a finished thread. New
                input on a thread paused by ``interrupt_before`` / ``interrupt_after`` is
                appended and the paused run goes on.
            config: the run config: ``thread_id`` (generated when absent),
                ``user_id``, ``recursion_limit``, ``durable_checkpoint_every_step``,
                ``node_timeout``, ``tool_timeout`` (seconds). The runtime writes ``run_id`` and
                ``_checkpoint_version`` into it.
            response_granularity: ``LOW`` -> ``{"messages"}`` (this run's input and output
                messages), ``PARTIAL`` adds ``"context"`` and ``"summary"``, ``FULL`` adds
                ``"state"``. A paused run adds ``"interrupted": True`` and ``"interrupt"``. An
                input whose messages (by ``message_id``) a run of the thread already consumed
                returns that run's result with ``"already_processed": True`` and runs nothing
                (docs/idempotent-turns.md).

        Raises:
            ConfigError: ``CONFIG_001`` (bad or misspelt config key), before any write.
            ValidationError: ``VALIDATION_000`` (bad input or node update), before any write.
            InterruptPendingError: ``GRAPH_008`` (also a ``ValueError``): new input on a thread
                waiting for an ``interrupt()`` answer.
            StaleStateError: ``STORAGE_CONFLICT_000``: another run wrote first; call again.
            CommitOutcomeUnknownError: ``STORAGE_COMMIT_UNKNOWN_001``: the connection broke while
                a checkpoint was committing and its outcome could not be read back; re-send the
                same input (Postgres).
            StorageError: ``STORAGE_FORBIDDEN_001``: the thread belongs to another user.
            GraphRecursionError: ``RECURSION_000``, state saved.
            NodeTimeoutError: ``NODE_TIMEOUT_001``.
            GraphError: ``GRAPH_005`` unsupported node return, ``GRAPH_006`` unknown route,
                ``GRAPH_ROUTING_001`` a router raised.
            LedgerWriteError: ``STORAGE_LEDGER_001``: a tool result could not be recorded.
        """
        result: dict[str, Any] | None = None
        agen = self._drive(input_data, config, response_granularity, stream=False)
        try:
            async for chunk in agen:
                if isinstance(chunk, _runner.RunResult):
                    result = chunk.data
        finally:
            await agen.aclose()
        assert result is not None
        return result

    def invoke(
        self,
        input_data: dict[str, Any] | None,
        config: dict[str, Any] | None = None,
        response_granularity: ResponseGranularity = ResponseGranularity.LOW,
    ) -> dict[str, Any]:
        """Sync twin of :meth:`ainvoke` (raises ``GraphError GRAPH_007`` inside an event loop)."""
        return run_sync(
            self.ainvoke,
            input_data,
            config,
            response_granularity,
            sync_name="invoke",
            async_name="ainvoke",
        )

    async def astream(
        self,
        input_data: dict[str, Any] | None,
        config: dict[str, Any] | None = None,
        response_granularity: ResponseGranularity = ResponseGranularity.LOW,
    ) -> AsyncIterator[StreamChunk]:
        """Run like ``ainvoke``, yielding ``StreamChunk`` s as the run goes.

        Chunks, in order: ``message`` for each input message and each message a node produces
        (a generator node's items as it yields them, ``message.delta`` fragments included;
        ``metadata`` ``{"node", "step"}``); after each node an ``updates`` chunk (``data``:
        ``node``, ``next``, the updated ``keys``) and, with ``PARTIAL`` or ``FULL``
        granularity, a ``state`` chunk; an ``updates`` chunk when the run pauses (``data``:
        ``node``, ``status``, ``interrupt_type`` ``"interrupt"`` / ``"before"`` /
        ``"after"``, ``interrupts``: the pending ``interrupt()`` payloads) or stops
        (``status`` ``"stopped"``); last, a ``state`` chunk with the state reached (``data``:
        ``{"status": execution status}``). A failure yields an ``error`` chunk (``data``:
        ``error_code``, ``reason``, ``message``) and is then raised.

        Args:
            input_data: as for ``ainvoke``.
            config: as for ``ainvoke``.
            response_granularity: as for ``ainvoke``; ``PARTIAL`` and ``FULL`` add a
                ``state`` chunk after each node.

        Raises:
            TenxGraphError: whatever ``ainvoke`` raises (same class and ``error_code``),
                raised after the ``error`` chunk has been yielded.
        """
        # One dict for the whole run: without a config, the thread id the runtime generates
        # is the one every chunk reports.
        config = config if config is not None else {}
        agen = self._drive(input_data, config, response_granularity)
        try:
            async for chunk in agen:
                if isinstance(chunk, _runner.RunResult):
                    yield StreamChunk.fast(
                        StreamEvent.STATE,
                        state=chunk.state,
                        data={"status": str(chunk.state.execution_meta.status)},
                        thread_id=config.get("thread_id"),
                        run_id=config.get("run_id"),
                    )
                    continue
                assert chunk is not None  # stream=True: the runner yields every chunk
                yield chunk
        except Exception as exc:
            # Every failure is announced, a node's own exception too (its class name stands in
            # for the error code).
            message = exc.message if isinstance(exc, TenxGraphError) else str(exc)
            yield StreamChunk.fast(
                StreamEvent.ERROR,
                data={
                    "error_code": getattr(exc, "error_code", None) or type(exc).__name__,
                    "reason": message,
                    "message": message,
                },
                thread_id=config.get("thread_id"),
                run_id=config.get("run_id"),
            )
            raise
        finally:
            await agen.aclose()

    def stream(
        self,
        input_data: dict[str, Any] | None,
        config: dict[str, Any] | None = None,
        response_granularity: ResponseGranularity = ResponseGranularity.LOW,
    ) -> Iterator[StreamChunk]:
        """Sync twin of :meth:`astream`."""
        return iterate_sync(
            lambda: self.astream(input_data, config, response_granularity),
            sync_name="stream",
            async_name="astream",
        )

    # -- control ---------------------------------------------------------------------------------
    async def astop(self, config: dict[str, Any]) -> dict[str, Any]:
        """Ask the thread's running run to stop between nodes (from any instance: the request is
        durable in the store). The run checkpoints with status ``stopped`` after the node it is
        running; ``invoke(None, config)`` resumes it.

        The request is timed: a run honours only a request made after it started, so a stop
        asked while no run is running (or racing the end of one) never stops a later run, and a
        stop asked before a new thread's first checkpoint still reaches its first run. A run in
        this process sees the request at its next node boundary; a run on another instance at
        its first node boundary ``STOP_POLL_S`` (1 s) or more after its previous check of the
        store (see ``docs/guarantees.md``).

        A ``config["run_id"]`` naming a background run (``asubmit``) cancels that run: a
        pending one ends ``cancelled`` at once (the answer adds ``"run_status"``), a running one
        is stopped as above and its worker records it ``cancelled``.

        Returns:
            ``{"ok": True, "running": bool}``: ``running`` tells whether a run of this thread
            is under way in this process or recorded as running in the store.
        """
        cfg = dict(config)
        normalize_config(cfg, new_run=False)
        # -- background runs: config["run_id"] naming a submitted run cancels that run
        if cfg.get("run_id") and self.checkpointer.store is not None:
            from tenxgraph.core import runs as _runs

            bg = await _runs.cancel(self, cfg)
            if bg is not None and bg.status != "running":
                return {"ok": True, "running": False, "run_status": bg.status}
        key = self.checkpointer.key_for(cfg)
        now = time.time()
        running = key in self._running
        if running:
            self._local_stops[key] = now
        await self.checkpointer.aset_stop(cfg, True, at=now)
        if not running:
            state = await self.checkpointer.aget_state(cfg, self.state_class)
            running = bool(state is not None and state.execution_meta.status == "running")
        return {"ok": True, "running": running}

    def request_stop_all(self) -> int:
        """Ask every run of this graph in flight in this process to stop at its next node
        boundary (the in-process half of :meth:`astop`, for every thread at once).

        Used by a server draining for shutdown: each run checkpoints, releases its lease and
        ends stopped, so another instance can take its thread. Nothing is written to the store;
        a thread whose stop was already requested is not counted again.

        Returns:
            How many runs were newly asked to stop.
        """
        now = time.time()
        asked = 0
        for key in list(self._running):
            if key not in self._local_stops:
                self._local_stops[key] = now
                asked += 1
        return asked

    def stop(self, config: dict[str, Any]) -> dict[str, Any]:
        """Sync twin of :meth:`astop`."""
        return run_sync(self.astop, config, sync_name="stop", async_name="astop")

    async def aclose(self) -> dict[str, Any]:
        """Release the checkpointer's connections and pools, after waiting up to
        ``shutdown_timeout`` seconds (``compile(shutdown_timeout=...)``, default 30) for this
        graph's runs still in flight in this process.

        Idempotent, as 10xGraph documents: a second call (with no run in between) does nothing
        and returns ``{"status": "already_closed"}``. A run started after ``aclose`` reopens
        the checkpointer's resources.

        Then the graph's ``BackgroundTaskManager`` is shut down (its tasks are cancelled and
        awaited for up to ``shutdown_timeout`` seconds more) and its publisher, if any, closed.

        Returns:
            ``{"status": "closed", "runs_in_flight": int, "background_tasks": dict}``
            (``runs_in_flight``: runs still going when the wait ended, ``0`` after a clean
            shutdown; ``background_tasks``: what ``BackgroundTaskManager.shutdown`` returned),
            or ``{"status": "already_closed"}``.
        """
        if self._closed:
            return {"status": "already_closed"}
        self._closed = True
        if self._running and self.shutdown_timeout > 0:
            # Poll rather than wait on an Event: the runs may live on another event loop
            # (sync twins run on the portal's thread), where an Event could not be set safely.
            with anyio.move_on_after(self.shutdown_timeout):
                while self._running:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
        in_flight = sum(self._running.values())
        background = await self.task_manager.shutdown(timeout=self.shutdown_timeout)
        if self.publisher is not None:
            await self.publisher.close()
        await self.checkpointer.aclose()
        return {"status": "closed", "runs_in_flight": in_flight, "background_tasks": background}

    def close(self) -> dict[str, Any]:
        """Sync twin of ``aclose``."""
        return run_sync(self.aclose, sync_name="close", async_name="aclose")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- background runs (tenxgraph.core.runs, tenxgraph.core._recovery) ------------------------
    async def asubmit(
        self, input_data: dict[str, Any] | None, config: dict[str, Any] | None = None
    ) -> RunInfo:
        """Record a background run and return at once; a worker (``tenxgraph worker``, or
        ``async with app.recovery()``) runs it. Durable when this returns: a crash after that
        never loses it (docs/how-to/background-runs.md).

        Args:
            input_data: as for :meth:`ainvoke` (JSON-encodable; messages keep their ids).
            config: as for :meth:`ainvoke`; a ``run_id`` given here makes the submit
                idempotent (the same id and input return the recorded run; run ids name a run
                within its thread). ``multitask_strategy`` is
                not kept: a thread's background runs run one at a time, in submission order.

        Returns:
            The run (status ``pending``, or the recorded one for a known ``run_id``).

        Raises:
            ConfigError: ``CONFIG_001`` for a bad config, or a checkpointer without a built-in
                store; before anything is written.
            ValidationError: ``VALIDATION_000`` for an input ``ainvoke`` would refuse or that
                is not JSON-encodable, or a known ``run_id`` with a different input
                (``context["reason"] == "conflict"``).
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        from tenxgraph.core import runs as _runs

        return await _runs.asubmit(self, input_data, config)

    def submit(
        self, input_data: dict[str, Any] | None, config: dict[str, Any] | None = None
    ) -> RunInfo:
        """Sync twin of :meth:`asubmit`."""
        return run_sync(self.asubmit, input_data, config, sync_name="submit", async_name="asubmit")

    async def aget_run(self, config: dict[str, Any], run_id: str) -> RunInfo:
        """The background run ``run_id`` of the config's thread and user, as it stands.

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when there is none (another
                user's run reads as missing).
        """
        from tenxgraph.core import runs as _runs

        return await _runs.aget_run(self, config, run_id)

    def get_run(self, config: dict[str, Any], run_id: str) -> RunInfo:
        """Sync twin of :meth:`aget_run`."""
        return run_sync(self.aget_run, config, run_id, sync_name="get_run", async_name="aget_run")

    async def ajoin(
        self,
        config: dict[str, Any],
        run_id: str,
        timeout: float | None = None,  # noqa: ASYNC109 - the issue's API
    ) -> RunInfo:
        """Wait until the background run reaches a final status (``completed``,
        ``interrupted``, ``error``, ``cancelled``) and return it (``result`` holds its
        answer). The store is read every 10 ms at first, backing off to 250 ms.

        Args:
            config: the run's thread and user.
            run_id: the run.
            timeout: seconds to wait at most (``None``: no limit).

        Raises:
            RunJoinTimeoutError: ``RUN_JOIN_TIMEOUT_001`` when ``timeout`` passed first (the
                run goes on).
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when there is no such run.
            ConfigError: ``CONFIG_001`` when ``timeout`` is not ``None`` or a finite number
                >= 0.
        """
        from tenxgraph.core import runs as _runs

        return await _runs.ajoin(self, config, run_id, timeout)

    def join(self, config: dict[str, Any], run_id: str, timeout: float | None = None) -> RunInfo:
        """Sync twin of :meth:`ajoin`."""
        return run_sync(self.ajoin, config, run_id, timeout, sync_name="join", async_name="ajoin")

    def recovery(self, **options: Any) -> Recovery:
        """The recovery loop of this graph, as an async context manager: while entered, this
        process runs submitted runs and finishes cut-off ones (``async with
        app.recovery(concurrency=4): ...``). Options: see
        :class:`tenxgraph.core._recovery.Recovery` (``concurrency``, ``sweep_interval_s``,
        ``max_crashes``, ``worker_id``, ``listen``, ``listen_dsn``, ``grace_s``).

        Raises:
            ConfigError: ``CONFIG_001`` for a bad option or a checkpointer without a built-in
                store.
        """
        from tenxgraph.core._recovery import RECOVERY_OPTIONS, Recovery
        from tenxgraph.core.exceptions import UnsupportedArgumentError, check_arguments

        try:
            unknown = {k: v for k, v in options.items() if k not in RECOVERY_OPTIONS}
            check_arguments("recovery", unknown, RECOVERY_OPTIONS)
        except UnsupportedArgumentError as exc:
            raise ConfigError(exc.message, context=dict(exc.context)) from None
        return Recovery(self, **options)

    # -- state access (beyond 10xGraph) ----------------------------------------------------------
    async def aget_state(
        self, config: dict[str, Any], version: int | None = None
    ) -> AgentState | None:
        """The thread's latest state (``None`` when it does not exist or is another user's),
        or with ``version``, its state exactly as it was at that kept version. Either way the
        head version seen is recorded in ``config["_checkpoint_version"]`` (0 for a missing
        thread), so a following ``arewind(config, ...)`` compares against it.

        Raises:
            ValidationError: ``VALIDATION_000`` when ``version`` is not an ``int`` from 1 to
                ``2**63 - 1``, before any I/O.
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when ``version`` is given and not
                kept; ``context["oldest_kept"]`` names the oldest kept version.
        """
        if version is not None:
            return await _timetravel.aget_state_at(self, config, version)
        return await self.checkpointer.aget_state(config, self.state_class)

    def get_state(self, config: dict[str, Any], version: int | None = None) -> AgentState | None:
        """Sync twin of :meth:`aget_state`."""
        return run_sync(
            self.aget_state, config, version, sync_name="get_state", async_name="aget_state"
        )

    async def aget_state_history(
        self, config: dict[str, Any], limit: int | None = None, before: int | None = None
    ) -> list[StateSnapshot]:
        """Kept versions of the thread, newest first (``limit``: count; ``before``: only
        versions below it). Records the head version seen in ``config["_checkpoint_version"]``
        as :meth:`aget_state` does."""
        return await self.checkpointer.aget_state_history(config, limit, before, self.state_class)

    def get_state_history(
        self, config: dict[str, Any], limit: int | None = None, before: int | None = None
    ) -> list[StateSnapshot]:
        """Sync twin of :meth:`aget_state_history`."""
        return run_sync(
            self.aget_state_history,
            config,
            limit,
            before,
            sync_name="get_state_history",
            async_name="aget_state_history",
        )

    async def aupdate_state(
        self, config: dict[str, Any], values: dict[str, Any] | Any
    ) -> AgentState:
        """Apply ``values`` to the thread's latest state as if a node had returned them
        (through each field's reducer) and write it as a new version (compare-and-swap).

        Returns:
            The new state.

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when the thread does not exist.
            StorageError: ``STORAGE_FORBIDDEN_001`` when the thread belongs to another user.
            StaleStateError: ``STORAGE_CONFLICT_000`` when it moved on meanwhile.
            ValidationError / GraphError: for values a node could not return either.
        """
        cfg = config if config is not None else {}
        normalize_config(cfg, new_run=False)
        loaded = await self.checkpointer.aload(cfg, self.state_class)
        if loaded is None:
            # Another user's thread reads as missing, but a write to it must be refused as
            # forbidden (DESIGN 3): the ledger lookup checks ownership without writing.
            await self.checkpointer.aledger_get(cfg, "")
            raise ResourceNotFoundError(
                f"thread {cfg['thread_id']!r} does not exist",
                context={"thread_id": cfg["thread_id"]},
            )
        update, _ = _runner.normalize_return(values, loaded.state, "__update_state__")
        new_state, _ = _runner.apply_update(loaded.state, update)
        committed = await self.checkpointer.acommit(cfg, new_state, loaded)
        return committed.state

    def update_state(self, config: dict[str, Any], values: dict[str, Any] | Any) -> AgentState:
        """Sync twin of :meth:`aupdate_state`."""
        return run_sync(
            self.aupdate_state, config, values, sync_name="update_state", async_name="aupdate_state"
        )

    # -- time travel (docs/how-to/time-travel.md; logic in tenxgraph.core._timetravel) ---------
    async def arewind(self, config: dict[str, Any], to_version: int) -> AgentState:
        """Make kept version ``to_version`` the thread's state again: a new head version equal
        to it is written (every version stays in history), as a compare-and-swap against the
        head the caller read (``config["_checkpoint_version"]``, else the head read now). The
        next run continues from there; a replayed tool call gets the ledger's answer.

        Returns:
            The new head state.

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when ``to_version`` is not kept
                (``context["oldest_kept"]``).
            ValidationError: ``VALIDATION_000`` when ``to_version`` is not an ``int`` from 1 to
                ``2**63 - 1``, before any I/O.
            StaleStateError: ``STORAGE_CONFLICT_000`` when another writer moved the thread
                first; nothing was written and ``config["_checkpoint_version"]`` is removed, so
                calling again compares against a fresh read. It does not wait for a run that
                holds the thread's lease (a plain compare-and-swap).
            StorageError: ``STORAGE_FORBIDDEN_001`` for another user's thread.
        """
        return await _timetravel.arewind(self, config, to_version)

    def rewind(self, config: dict[str, Any], to_version: int) -> AgentState:
        """Sync twin of :meth:`arewind`."""
        return run_sync(self.arewind, config, to_version, sync_name="rewind", async_name="arewind")

    async def afork(
        self,
        config: dict[str, Any],
        at_version: int,
        to_thread_id: str,
        update: dict[str, Any] | Any = None,
    ) -> dict[str, Any]:
        """Create thread ``to_thread_id`` (same user) whose first version is kept version
        ``at_version`` of the config's thread, with ``update`` applied as ``update_state``
        applies values (through each field's reducer) in the same write. Message rows are
        copied inside the store, never re-encoded (without ``update`` not even read); the fork
        starts with a copy of the source's tool ledger; its metadata and version 1 record
        ``forked_from``. The source thread is never changed.

        Returns:
            The fork's config (``{"thread_id": to_thread_id, "user_id": ...}``, the caller's
            user): pass it to ``ainvoke`` to continue the fork.

        Raises:
            ConfigError: ``CONFIG_001`` for an invalid ``to_thread_id``.
            ValidationError: ``VALIDATION_000`` when ``at_version`` is not an ``int`` from 1 to
                ``2**63 - 1`` or ``to_thread_id`` is the source thread, before any I/O.
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when ``at_version`` is not kept.
            StaleStateError: ``STORAGE_CONFLICT_000`` when thread ``to_thread_id`` exists.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns ``to_thread_id``.
            ValidationError / GraphError: for an ``update`` a node could not return either.
        """
        return await _timetravel.afork(self, config, at_version, to_thread_id, update)

    def fork(
        self,
        config: dict[str, Any],
        at_version: int,
        to_thread_id: str,
        update: dict[str, Any] | Any = None,
    ) -> dict[str, Any]:
        """Sync twin of :meth:`afork`."""
        return run_sync(
            self.afork,
            config,
            at_version,
            to_thread_id,
            update,
            sync_name="fork",
            async_name="afork",
        )
