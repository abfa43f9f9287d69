"""``ToolNode``: runs the tool calls of the last assistant message, through the idempotency ledger.

What a ``ToolNode`` does when the graph runs it:

1. It takes the **last assistant message** of ``state.context`` and the tool calls of that
   message not yet answered by a ``tool`` message after it (matched by ``tool_call_id``). If
   the last assistant message makes no calls, it returns ``[]``.
2. The calls run **in parallel** (one anyio task each); the resulting tool messages come back
   **in the model's order**, whatever order they finish in.
3. Each call goes through the **ledger** (DESIGN section 3), keyed by
   ``call_key = f"{assistant_message_id}:{tool_call_id}:{digest}"`` where ``digest`` is the
   first 16 hex characters of ``sha256(name + canonical JSON of the arguments)``. So a
   replayed node (same assistant message, same call) is answered from the ledger, while a model
   that reuses a ``tool_call_id`` for a *different* call gets that call executed.

   * Before running: ``checkpointer.aledger_get``. A hit returns the recorded messages without
     calling the tool: span event ``tenxgraph.ledger.hit``, counter ``tenxgraph.ledger.hits``,
     ``run.stats["ledger_hits"] += 1``. A failed read is retried (backoff from 50 ms, doubling
     up to 1 s) for at most ``LEDGER_READ_RETRY_S`` seconds and never longer than the tool's
     timeout; if it still fails (or the entry cannot be decoded, which retrying cannot fix),
     the node logs a warning (logger ``tenxgraph.core.graph.tool_node``), adds the span event
     ``tenxgraph.ledger.read_failed``, counts ``tenxgraph.ledger.read_fallbacks`` and runs
     the tool (the documented trade-off: the call may repeat a recorded side effect).
   * Right after the tool returns, before anything else: ``checkpointer.aledger_put`` (in a
     shielded scope, so a cancelled run still records a side effect that already happened).
     A failure raises :class:`~tenxgraph.core.exceptions.LedgerWriteError` and the run stops
     (the node's output is not checkpointed, so the thread does not advance). Sibling calls
     already running are let finish (and recorded) rather than cut off mid-side-effect; then
     the first failure, in call order, is raised. The same holds for the runtime's
     ``GraphInterrupt`` (``interrupt()`` inside a tool): the other calls finish and are
     recorded, then the interrupt (or a ``BaseExceptionGroup`` of several) is raised, and on
     resume the recorded calls are ledger hits while the interrupted ones run again.
   * If another process recorded the same call first (a racing replay), its recorded result
     wins and is what this node returns.

4. **Failures become tool messages, not crashes**: a tool that raises, runs past
   ``config["tool_timeout"]`` seconds (default 300; ``None`` disables), is unknown, receives
   arguments that fail its schema (or are not a JSON object), or returns a value that cannot
   be stored, answers the call with a ``role="tool"`` message whose ``ToolResultBlock`` has
   ``is_error=True`` and a text starting with ``"Error: "`` that tells the model what went
   wrong. **These errors are recorded in the ledger too**: a replay returns the same error
   instead of running the tool again, because a tool that failed may still have done part of
   its side effect (a timed-out payment may have gone through). To retry, the model issues a
   new call (a new assistant message, hence a new ``call_key``).

   **Replays after time travel.** A rewound or forked thread (docs/how-to/time-travel.md) that
   replays a call is answered by the ledger like any replay (a fork starts with a copy of its
   source's ledger). ``config["replay_tools"] = True`` asks for re-execution instead: the key
   becomes ``f"{call_key}:replay:{run_id}"``, a new idempotency key per run, so the tool runs
   again once (and a crash-replay inside that run is still a ledger hit). The tool sees the
   key to pass downstream in ``current_tool_call().idempotency_key``: its ``tool_call_id``,
   or ``f"{tool_call_id}:replay:{run_id}"`` under ``replay_tools``.

   A sync tool that times out keeps running in its worker thread (threads cannot be killed);
   its late result is discarded. Exceptions that define ``_tenxgraph_propagate = True`` (the
   runtime's control-flow signals) are not turned into messages but re-raised.

Outside a graph run (no :func:`~tenxgraph.core._context.current_run`, e.g. calling the node
directly in a unit test) there is no ledger: calls run without recording.

The ledger's ``result`` bytes are ``serde.dumps({"v": 1, "messages": [Message, ...]})``: the
exact messages the call produced. The node always returns the messages decoded from those bytes,
so a first run and a replay return identical messages (same ``message_id``, timestamp and
content). A tool message built by the node has the deterministic id ``uuid5(call_key)``.

State updates and handoffs: a tool returning
:class:`~tenxgraph.core.state.tool_result.ToolResult` answers with its ``message`` and updates
the state fields of its ``state`` dict; a handoff tool (``tenxgraph.prebuilt.tools.
create_handoff_tool``) is not run: its call is answered ``"Handed off to X."`` and the run goes
to node ``X``. Both are kept in the ledger entry (``{"v": 1, "messages": [...], "state": {...},
"goto": "X"}``, the last two only when present), so a replay applies the recorded update and
route without running anything. When any call updates state or hands off, the node returns a
``Command(update={"messages": [...], **fields}, goto=...)`` instead of the message list (the
first handoff in call order wins).

Tool functions: sync tools run in a worker thread (``anyio.to_thread.run_sync``); async tools
on the event loop. Parameters named ``tool_call_id``, ``state`` and ``config`` are injected when
declared and never shown to the model. During a call, :func:`tenxgraph.core._context.
current_tool_call` gives the call's ``tool_call_id`` (to pass on as an idempotency key), name
and ``call_key``. A tool returns a ``str``, any JSON-compatible value (Pydantic models,
dataclasses, dates, enums... are converted to their JSON form), a ``Message``, or a list of
``Message`` s.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import inspect
import logging
import threading
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import TYPE_CHECKING, Any

import anyio
import orjson
import pydantic
import pydantic_core
import sniffio

from tenxgraph.core._context import _TOOL_CALL, RunContext, ToolCallContext, current_run
from tenxgraph.core._publish import run_publisher
from tenxgraph.core._run_metrics import tool_finished
from tenxgraph.core.exceptions import (
    GraphError,
    LedgerWriteError,
    SerializationError,
    StorageError,
    TenxGraphError,
)
from tenxgraph.core.state import Message, ToolCallBlock, ToolResultBlock
from tenxgraph.core.state.tool_result import ToolResult
from tenxgraph.records import LedgerEntry
from tenxgraph.storage import serde
from tenxgraph.telemetry import ATTR, EVENT, METRIC, SPAN, counter, span

from ._schema import ToolSpec, build_tool_spec, format_validation_error

if TYPE_CHECKING:
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer

__all__ = ["ToolNode", "call_key_for", "pending_tool_calls"]

#: What one call produced: its messages, state updates and handoff target.
_Outcome = tuple[list[Message], dict[str, Any], str | None]

logger = logging.getLogger(__name__)

_NAMESPACE = uuid.UUID("5d1f4c2e-8a0b-4b7e-9a53-7e0c1b8f2d11")
_LEDGER_FORMAT = 1
_LEDGER_PUT_TIMEOUT_S = 60.0
#: Seconds a failing ledger read is retried (capped by the tool's timeout) before the tool runs.
LEDGER_READ_RETRY_S = 5.0
_DEFAULT_TOOL_TIMEOUT_S = 300.0


def call_key_for(assistant_message_id: str | int, call: ToolCallBlock) -> str:
    """The ledger key of one tool call (see the module docstring).

    Args:
        assistant_message_id: the ``message_id`` of the assistant message making the call.
        call: the call (``id``, ``name``, ``args``).

    Returns:
        ``f"{assistant_message_id}:{call.id}:{sha256(name + canonical_json(args))[:16]}"``;
        canonical JSON has sorted keys and no whitespace.
    """
    canonical = orjson.dumps(
        call.args, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str
    ).decode()
    digest = hashlib.sha256((call.name + canonical).encode()).hexdigest()[:16]
    return f"{assistant_message_id}:{call.id}:{digest}"


def pending_tool_calls(context: list[Message]) -> tuple[Message | None, list[ToolCallBlock]]:
    """The last assistant message and its calls not yet answered by a later tool message.

    Args:
        context: the conversation, oldest first.

    Returns:
        ``(assistant_message, calls)`` with ``calls`` in the model's order; ``(None, [])``
        when there is no assistant message, ``(msg, [])`` when it makes no unanswered call.
    """
    for i in range(len(context) - 1, -1, -1):
        msg = context[i]
        if msg.role != "assistant":
            continue
        calls = msg.tool_calls()
        if not calls:
            return msg, []
        answered: set[str] = set()
        for later in context[i + 1 :]:
            if later.role != "tool":
                continue
            if later.tool_call_id:
                answered.add(later.tool_call_id)
            for block in later.content:
                if isinstance(block, ToolResultBlock):
                    answered.add(block.tool_call_id)
        return msg, [c for c in calls if c.id not in answered]
    return None, []


@functools.lru_cache(maxsize=1024)
def _spec_for(func: Callable[..., Any]) -> ToolSpec:
    return build_tool_spec(func)


def _spec(func: Callable[..., Any]) -> ToolSpec:
    try:
        return _spec_for(func)
    except TypeError:  # unhashable callable object
        return build_tool_spec(func)


def _to_content(value: Any) -> str | list[Any] | dict[str, Any] | None:
    """A tool's plain return value as ``ToolResultBlock.content`` (JSON form).

    Raises:
        pydantic_core.PydanticSerializationError: no JSON form exists.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return orjson.dumps(value).decode() if not isinstance(value, float) else repr(value)
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    data = pydantic_core.to_jsonable_python(value)
    if isinstance(data, (dict, list, str)) or data is None:
        return data
    return orjson.dumps(data).decode()


class ToolNode:
    """A graph node that runs tool calls (10xGraph-compatible; see the module docstring).

    Args:
        functions: the tools: sync or async functions, bound methods, ``functools.partial``
            objects or callable objects, optionally decorated with
            ``tenxgraph.utils.tool``. Names must be unique.

    Raises:
        GraphError: ``GRAPH_001`` when two tools have the same name or a tool is not callable.

    Example::

        def get_weather(location: str) -> str:
            \"\"\"Get the current weather for a specific location.\"\"\"
            return f"The weather in {location} is sunny."

        tool_node = ToolNode([get_weather])
        graph.add_node("TOOL", tool_node)
    """

    #: Called by the runner as ``await node(state=state, config=config)``.
    _tenxgraph_node = True

    def __init__(self, functions: Iterable[Callable[..., Any]]) -> None:
        self._tools: dict[str, ToolSpec] = {}
        for func in functions:
            self.add_tool(func)

    def add_tool(self, func: Callable[..., Any]) -> None:
        """Register one more tool (offered from the next model call on).

        Args:
            func: a sync or async function, bound method, ``functools.partial`` or callable
                object, optionally decorated with ``tenxgraph.utils.tool``.

        Raises:
            GraphError: ``GRAPH_001`` the name is taken or ``func`` is not callable.
        """
        try:
            spec = _spec(func)
        except TypeError as exc:
            raise GraphError(str(exc), error_code="GRAPH_001") from None
        if spec.name in self._tools:
            raise GraphError(
                f"two tools are named {spec.name!r}; rename one with @tool(name=...)",
                error_code="GRAPH_001",
                context={"tool": spec.name},
            )
        self._tools[spec.name] = spec

    def remove_tool(self, name: str) -> bool:
        """Stop offering tool ``name`` (from the next model call on).

        Returns:
            ``True`` when the tool was registered.
        """
        return self._tools.pop(name, None) is not None

    def __repr__(self) -> str:
        return f"ToolNode({list(self._tools)})"

    # -- schemas -----------------------------------------------------------------------------------
    @property
    def tool_names(self) -> list[str]:
        """The tools' names, in the order given."""
        return list(self._tools)

    @property
    def _funcs(self) -> dict[str, Callable[..., Any]]:
        """Tool name -> function, in the order given (the mapping 10xGraph's ``ToolNode``
        keeps under this name; a new dict on every call)."""
        return {name: spec.func for name, spec in self._tools.items()}

    def get_tool(self, name: str) -> ToolSpec | None:
        """The :class:`~tenxgraph.core.graph._schema.ToolSpec` of tool ``name``, or ``None``."""
        return self._tools.get(name)

    def tool_schemas(self, tags: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The tools in OpenAI's function-calling shape, in the order given.

        Args:
            tags: keep only tools with at least one of these ``@tool`` tags (``None``: all).

        Returns:
            ``[{"type": "function", "function": {"name", "description", "parameters"}}]``
            (new dicts on every call; safe to modify).
        """
        wanted = set(tags) if tags else None
        out = []
        for spec in self._tools.values():
            if wanted is not None and not (spec.tags & wanted):
                continue
            out.append(orjson.loads(orjson.dumps(spec.openai_schema())))
        return out

    def get_local_tool(self, tags: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The schemas of the tools with at least one of ``tags`` (all without ``tags``), in
        OpenAI's function-calling shape (10xGraph's name for :meth:`tool_schemas`)."""
        return self.tool_schemas(tags)

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """Every tool's schema exactly as it is sent to the model (OpenAI's function-calling
        shape ``{"type": "function", "function": {"name", "description", "parameters"}}``)."""
        return self.tool_schemas()

    async def all_tools(self, tags: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Async twin of :meth:`tool_schemas` (10xGraph's ``await tool_node.all_tools()``)."""
        return self.tool_schemas(tags)

    def all_tools_sync(self, tags: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Same as :meth:`tool_schemas` (10xGraph's ``all_tools_sync``)."""
        return self.tool_schemas(tags)

    # -- execution ---------------------------------------------------------------------------------
    def _emits(self) -> bool:
        """Whether a tool of this node declares ``emit`` (a ``StreamEmitter``)."""
        return any("emit" in spec.injected for spec in self._tools.values())

    async def node_stream(self, state: Any, config: dict[str, Any] | None = None) -> Any:
        """The node as the graph runs it: the progress chunks of tools declaring ``emit``
        (``StreamChunk`` items, while the tools run when the run streams on asyncio), then
        ``[result]``, ``result`` being what :meth:`__call__` returns.

        Args:
            state: the graph state.
            config: the run's config.

        Yields:
            ``StreamChunk`` progress chunks, then a one-item list holding the node's result.

        Raises:
            LedgerWriteError, StorageError: as :meth:`__call__`.
        """
        run = current_run()
        if run is None or not run.stream or not self._emits():
            yield [await self(state, config)]
            return
        if sniffio.current_async_library() != "asyncio":
            # No task outliving one step of this generator under trio: the chunks follow the
            # calls instead of accompanying them.
            buffered: list[Any] = []
            token = _EMIT_SINK.set(buffered.append)
            try:
                result = await self(state, config)
            finally:
                _EMIT_SINK.reset(token)
            for chunk in buffered:
                yield chunk
            yield [result]
            return
        async for item in _live(self, state, config):
            yield item

    async def __call__(self, state: Any, config: dict[str, Any] | None = None) -> Any:
        """Run the pending tool calls of the last assistant message of ``state.context``.

        Args:
            state: the graph state (an ``AgentState``); passed to tools declaring ``state``.
            config: the run's config; ``tool_timeout`` (seconds, default 300, ``None``
                disables) bounds each call; passed to tools declaring ``config``.

        Returns:
            The tool messages, in the order of the calls (``[]`` when nothing is pending); or,
            when a call returned a ``ToolResult`` with state or was a handoff, a
            ``Command(update={"messages": [...], **fields}, goto=node_or_None)``.

        Raises:
            LedgerWriteError: ``STORAGE_LEDGER_001``: a result could not be recorded; the run
                must stop. ``context``: ``thread_id``, ``tool_call_id``, ``tool``.
            StorageError: ``STORAGE_FORBIDDEN_001`` when the thread belongs to another user.
        """
        run = current_run()
        if config is None:
            config = run.config if run is not None else {}
        context = getattr(state, "context", None) or []
        assistant, calls = pending_tool_calls(context)
        if assistant is None or not calls:
            return []
        # The same call repeated in one message (same id, name and arguments) is one call: it
        # runs once and gets one tool message (a tool message answers a call id).
        seen: set[str] = set()
        unique: list[ToolCallBlock] = []
        for call in calls:
            key = call_key_for(assistant.message_id, call)
            if key not in seen:
                seen.add(key)
                unique.append(call)
        calls = unique
        results: list[_Outcome | None] = [None] * len(calls)
        errors: list[BaseException | None] = [None] * len(calls)

        cancelled = anyio.get_cancelled_exc_class()

        async def one(i: int, call: ToolCallBlock) -> None:
            try:
                results[i] = await self._run_call(assistant, call, state, config, run)
            except cancelled:
                raise
            except BaseException as exc:  # noqa: BLE001 - raised once the siblings finished
                errors[i] = exc

        if len(calls) == 1:
            await one(0, calls[0])
        else:
            async with anyio.create_task_group() as tg:
                for i, call in enumerate(calls):
                    tg.start_soon(one, i, call)
        _raise_failures([e for e in errors if e is not None])
        out: list[Message] = []
        updates: dict[str, Any] = {}
        goto: str | None = None
        for outcome in results:
            if outcome is None:
                continue
            msgs, upd, target = outcome
            out.extend(msgs)
            updates.update(_typed_updates(upd, state))
            if target is not None and goto is None:
                goto = target
        if not updates and goto is None:
            return out
        from tenxgraph.utils.command import Command

        return Command(update={"messages": out, **updates}, goto=goto)

    async def invoke(
        self,
        name: str,
        args: dict[str, Any] | None = None,
        tool_call_id: str | None = None,
        config: dict[str, Any] | None = None,
        state: Any = None,
        callback_manager: Any = None,
    ) -> Message:
        """Run one tool directly, outside the model's loop (tests, scripts).

        No ledger is used: the tool runs every time it is invoked. Failures answer as in a
        graph run (an error tool message, ``is_error=True``).

        Args:
            name: the tool's name.
            args: its arguments (a JSON object).
            tool_call_id: the call id to answer (default: a fresh one); injected into tools
                declaring ``tool_call_id``.
            config: passed to tools declaring ``config``; ``tool_timeout`` applies.
            state: passed to tools declaring ``state``.
            callback_manager: a ``tenxgraph.utils.CallbackManager`` whose ``TOOL`` (or, for
                the skill tools, ``SKILL``) callbacks run around the call (default: those of
                the running graph, if any).

        Returns:
            The tool message answering the call (``role="tool"``).
        """
        from tenxgraph.models.base import new_tool_call_id

        call = ToolCallBlock(
            id=tool_call_id or new_tool_call_id(), name=name, args=dict(args or {})
        )
        key = call_key_for("invoke", call)
        with span(SPAN.TOOL, attributes={ATTR.TOOL_NAME: name, ATTR.TOOL_CALL_ID: call.id}) as sp:
            token = _TOOL_CALL.set(ToolCallContext(tool_call_id=call.id, name=name, call_key=key))
            try:
                msgs, _, _ = await self._execute(
                    self._tools.get(name), call, key, state, config or {}, sp, callback_manager
                )
            finally:
                _TOOL_CALL.reset(token)
        return next((m for m in msgs if m.role == "tool"), msgs[0])

    async def _run_call(
        self,
        assistant: Message,
        call: ToolCallBlock,
        state: Any,
        config: dict[str, Any],
        run: RunContext | None,
    ) -> _Outcome:
        key = call_key_for(assistant.message_id, call)
        idem = call.id
        if config.get("replay_tools") is True:
            # An explicit re-execution (time travel): a new idempotency key per run, so the
            # call runs again once and a replay of this run's node still hits the ledger.
            suffix = f":replay:{config.get('run_id') or ''}"
            key, idem = key + suffix, call.id + suffix
        spec = self._tools.get(call.name)
        attrs = {ATTR.TOOL_NAME: call.name, ATTR.TOOL_CALL_ID: call.id}
        checkpointer = run.checkpointer if run is not None else None
        with span(SPAN.TOOL, attributes={**attrs, ATTR.GENAI_OPERATION: SPAN.TOOL}) as sp:
            if checkpointer is not None:
                recorded = await self._ledger_read(checkpointer, config, key, call, sp)
                if recorded is not None:
                    sp.add_event(EVENT.LEDGER_HIT, attrs)
                    counter(METRIC.LEDGER_HITS).add(1, {ATTR.TOOL_NAME: call.name})
                    if run is not None:
                        run.stats["ledger_hits"] = run.stats.get("ledger_hits", 0) + 1
                    return recorded
            tool_ctx = ToolCallContext(
                tool_call_id=call.id, name=call.name, call_key=key, idempotency_key=idem
            )
            token = _TOOL_CALL.set(tool_ctx)
            publishing = run_publisher() is not None
            if publishing:
                await _tool_event(call, "start")
            started = time.perf_counter()
            node_name = run.node if run is not None else ""
            try:
                outcome = await self._execute(spec, call, key, state, config, sp)
            except Exception as exc:
                tool_finished(node_name, call.name, started, True, tool_ctx.timed_out)
                if publishing:
                    await _tool_event(call, "error", exc=exc)
                raise
            finally:
                _TOOL_CALL.reset(token)
            failed = _is_error_outcome(outcome[0])
            tool_finished(node_name, call.name, started, failed, tool_ctx.timed_out)
            if publishing:
                await _tool_event(call, "result", failed=failed)
            if run is not None:
                run.stats["tool_runs"] = run.stats.get("tool_runs", 0) + 1
            data = self._encode(outcome, call, key)
            if checkpointer is None:
                return _decode(data)
            winner = await self._ledger_write(checkpointer, config, key, call, data)
            if winner is not None and winner.result != data:
                try:
                    return _decode(winner.result)
                except Exception:  # noqa: BLE001 - keep our own result if the winner is unreadable
                    logger.warning(
                        "ledger entry for tool %r call %s cannot be decoded; using this run's result",
                        call.name,
                        call.id,
                    )
            return _decode(data)

    # -- ledger ------------------------------------------------------------------------------------
    async def _ledger_read(
        self, checkpointer: Any, config: dict[str, Any], key: str, call: ToolCallBlock, sp: Any
    ) -> _Outcome | None:
        timeout = config.get("tool_timeout", _DEFAULT_TOOL_TIMEOUT_S)
        budget = (
            LEDGER_READ_RETRY_S if timeout is None else min(LEDGER_READ_RETRY_S, float(timeout))
        )
        deadline = anyio.current_time() + budget
        delay = 0.05
        while True:
            try:
                entry = await checkpointer.aledger_get(config, key)
                if entry is None:
                    return None
                return _decode(entry.result, config.get("thread_id"))
            except SerializationError as exc:  # the entry itself is damaged: retrying won't help
                reason = exc.error_code
                break
            except StorageError as exc:
                if exc.error_code == "STORAGE_FORBIDDEN_001":
                    raise
                reason = exc.error_code
            except Exception as exc:  # noqa: BLE001 - a failed read must not stop the run
                reason = type(exc).__name__
            if anyio.current_time() + delay > deadline:
                break
            await anyio.sleep(delay)
            delay = min(delay * 2, 1.0)
        counter(METRIC.LEDGER_READ_FALLBACKS).add(
            1, {ATTR.TOOL_NAME: call.name, ATTR.ERROR_TYPE: reason}
        )
        logger.warning(
            "ledger read failed for tool %r call %s on thread %s (%s); running the tool again",
            call.name,
            call.id,
            config.get("thread_id"),
            reason,
        )
        sp.add_event(
            EVENT.LEDGER_READ_FAILED,
            {ATTR.TOOL_NAME: call.name, ATTR.TOOL_CALL_ID: call.id, ATTR.ERROR_TYPE: reason},
        )
        return None

    async def _ledger_write(
        self,
        checkpointer: BaseCheckpointer[Any],
        config: dict[str, Any],
        key: str,
        call: ToolCallBlock,
        data: bytes,
    ) -> LedgerEntry | None:
        entry = LedgerEntry(
            call_key=key,
            tool_call_id=call.id,
            tool_name=call.name,
            result=data,
            created_at=time.time(),
        )
        context = {"thread_id": config.get("thread_id"), "tool_call_id": call.id, "tool": call.name}
        # Shielded: the tool has already run, so its result must be recorded even when the
        # run is being cancelled (stop, node timeout); bounded so a hung store cannot block.
        with anyio.CancelScope(shield=True):
            try:
                with anyio.fail_after(_LEDGER_PUT_TIMEOUT_S):
                    return await checkpointer.aledger_put(config, entry)
            except LedgerWriteError as exc:
                if not exc.context:
                    exc.context.update(context)
                raise
            except StorageError as exc:
                if exc.error_code == "STORAGE_FORBIDDEN_001":
                    raise
                raise LedgerWriteError(
                    f"the result of tool {call.name!r} (call {call.id}) could not be recorded in "
                    f"the ledger ({exc.error_code}); the run stops and the thread does not advance. "
                    "The tool did run: resuming with invoke(None, config) runs it again, so "
                    "reconcile this call (see context) before resuming",
                    context=context,
                ) from exc
            except Exception as exc:  # noqa: BLE001 - any failure to record stops the run
                raise LedgerWriteError(
                    f"the result of tool {call.name!r} (call {call.id}) could not be recorded in "
                    f"the ledger ({type(exc).__name__}); the run stops and the thread does not "
                    "advance. The tool did run: resuming with invoke(None, config) runs it "
                    "again, so reconcile this call (see context) before resuming",
                    context=context,
                ) from exc
        # a shield nobody cancels never swallows what its body raised or returned
        raise AssertionError("unreachable")

    # -- one call ----------------------------------------------------------------------------------
    async def _execute(
        self,
        spec: ToolSpec | None,
        call: ToolCallBlock,
        key: str,
        state: Any,
        config: dict[str, Any],
        sp: Any,
        callback_manager: Any = None,
    ) -> _Outcome:
        """Run one call; every failure becomes an error tool message (``callback_manager``:
        instead of the running graph's)."""
        timeout_s = config.get("tool_timeout", _DEFAULT_TOOL_TIMEOUT_S)
        if spec is None:
            names = ", ".join(self._tools) or "(none)"
            return _only(
                [_error_message(call, key, f"unknown tool {call.name!r}; available tools: {names}")]
            )
        if "__raw_arguments__" in call.args and "__raw_arguments__" not in spec.arg_names:
            raw = str(call.args["__raw_arguments__"])
            shown = raw if len(raw) <= 200 else raw[:197] + "..."
            return _only(
                [
                    _error_message(
                        call,
                        key,
                        f"the arguments for tool {call.name!r} are not a JSON object: {shown}",
                    )
                ]
            )
        is_handoff = getattr(spec.func, "__handoff_tool__", False) is True
        if is_handoff:
            return self._handoff(spec, call, key)
        cbm, cb_ctx, cb_input = _tool_callbacks(call, spec, callback_manager)
        args = call.args
        if cbm is not None:
            try:
                cb_input = await cbm.execute_before_invoke(cb_ctx, cb_input)
            except Exception as exc:  # noqa: BLE001 - a blocking callback answers the model
                _tool_failed(sp, call, exc)
                return _only([_error_message(call, key, f"tool {call.name!r} was blocked: {exc}")])
            if isinstance(cb_input, dict) and isinstance(cb_input.get("args"), dict):
                args = cb_input["args"]
        try:
            kwargs = spec.validate_args(args)
        except pydantic.ValidationError as exc:
            return _only([_error_message(call, key, format_validation_error(call.name, exc))])
        if "tool_call_id" in spec.injected:
            kwargs["tool_call_id"] = call.id
        if "state" in spec.injected:
            kwargs["state"] = state
        if "config" in spec.injected:
            kwargs["config"] = config
        if "emit" in spec.injected:
            kwargs["emit"] = _emitter(call, config)
        if spec.di:
            kwargs.update(_services(spec))
        # The last thing before the tool runs: a run whose lease lapsed stops here.
        fence = await _fence_before_call(current_run())
        tool_ctx = _TOOL_CALL.get()
        if tool_ctx is not None:
            tool_ctx.fence = fence
        scope: anyio.CancelScope | None = None
        try:
            with anyio.fail_after(timeout_s) as scope:
                if spec.is_async:
                    value = await spec.func(**kwargs)
                else:
                    value = await anyio.to_thread.run_sync(
                        functools.partial(spec.func, **kwargs), abandon_on_cancel=True
                    )
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:  # noqa: BLE001 - a failing tool answers the model, not the run
            recovered = None
            if cbm is not None and not getattr(exc, "_tenxgraph_propagate", False):
                recovered = await cbm.execute_on_error(cb_ctx, cb_input, exc)
            if recovered is not None:
                value = recovered
            elif isinstance(exc, TimeoutError) and scope is not None and scope.cancel_called:
                tool_ctx = _TOOL_CALL.get()
                if tool_ctx is not None:
                    tool_ctx.timed_out = True
                _tool_failed(sp, call, exc)
                return _only(
                    [_error_message(call, key, f"tool {call.name!r} timed out after {timeout_s} s")]
                )
            elif getattr(exc, "_tenxgraph_propagate", False):
                raise
            else:
                _tool_failed(sp, call, exc)
                detail = str(exc) if not isinstance(exc, TenxGraphError) else exc.message
                text = f"tool {call.name!r} raised {type(exc).__name__}"
                return _only([_error_message(call, key, f"{text}: {detail}" if detail else text)])
        if cbm is not None:
            try:
                value = await cbm.execute_after_invoke(cb_ctx, cb_input, value)
            except Exception as exc:  # noqa: BLE001 - a failing callback answers the model
                _tool_failed(sp, call, exc)
                return _only(
                    [
                        _error_message(
                            call,
                            key,
                            f"an after-invoke callback of tool {call.name!r} failed: {exc}",
                        )
                    ]
                )
        if isinstance(value, ToolResult) and value.is_error:
            if value.state:
                return _only(
                    [
                        _error_message(
                            call,
                            key,
                            f"tool {call.name!r} returned an error ToolResult with a state "
                            "update; an error updates nothing",
                        )
                    ]
                )
            text = value.message if isinstance(value.message, str) else str(value.message)
            return _only([_error_message(call, key, text)])
        if isinstance(value, ToolResult):
            bad = _bad_state_keys(value.state, state)
            if bad:
                return _only(
                    [
                        _error_message(
                            call,
                            key,
                            f"tool {call.name!r} returned a ToolResult updating {bad}, which are not "
                            f"fields of the graph state {type(state).__name__}",
                        )
                    ]
                )
            try:
                return _result_messages(value.message, call, key), dict(value.state), None
            except Exception as exc:  # noqa: BLE001 - a value with no JSON form
                _tool_failed(sp, call, exc)
                return _only(
                    [
                        _error_message(
                            call,
                            key,
                            f"tool {call.name!r} returned a message that cannot be stored",
                        )
                    ]
                )
        try:
            return _only(_result_messages(value, call, key))
        except Exception as exc:  # noqa: BLE001 - a value with no JSON form
            _tool_failed(sp, call, exc)
            return _only(
                [
                    _error_message(
                        call,
                        key,
                        f"tool {call.name!r} returned a {type(value).__name__} that cannot be "
                        "stored as JSON; return a str, a JSON-compatible value or a Message",
                    )
                ]
            )

    def _handoff(self, spec: ToolSpec, call: ToolCallBlock, key: str) -> _Outcome:
        """Answer a handoff call and name the node to go to (module docstring)."""
        target = str(getattr(spec.func, "__target_agent__", "") or "")
        run = current_run()
        nodes = list(run.nodes) if run is not None else []
        node = target if target in nodes else None
        if node is None:
            folded = [n for n in nodes if n.lower() == target.lower()]
            node = folded[0] if len(folded) == 1 else None
        if node is None:
            where = f"; nodes: {', '.join(nodes)}" if nodes else " (outside a graph run)"
            return _only(
                [_error_message(call, key, f"cannot hand off: no node named {target!r}{where}")]
            )
        msg = Message.tool_message(
            f"Handed off to {node}.",
            tool_call_id=call.id,
            message_id=_message_id(key),
            meta={"tool_name": call.name, "handoff": node},
        )
        return [msg], {}, node

    def _encode(self, outcome: _Outcome, call: ToolCallBlock, key: str) -> bytes:
        messages, updates, goto = outcome
        record: dict[str, Any] = {"v": _LEDGER_FORMAT, "messages": messages}
        if updates:
            record["state"] = updates
        if goto is not None:
            record["goto"] = goto
        try:
            return serde.dumps(record)
        except SerializationError as exc:
            where = exc.context.get("path", "$")
            bad = exc.context.get("type", "value")
            fallback = _error_message(
                call,
                key,
                f"tool {call.name!r} returned a value that cannot be stored ({bad} at {where}); "
                "return a str, a JSON-compatible value or a Message",
            )
            return serde.dumps({"v": _LEDGER_FORMAT, "messages": [fallback]})


def _raise_failures(failures: list[BaseException]) -> None:
    """Re-raise what escaped the calls, once every call has finished.

    A :class:`LedgerWriteError` wins (the run must stop), then any other ``Exception`` (first
    in call order); control-flow signals that are not ``Exception`` s (the runtime's
    ``GraphInterrupt`` from ``interrupt()`` inside a tool) are raised alone, or together as a
    ``BaseExceptionGroup`` when several calls raised them (the runner pauses for all).
    """
    if not failures:
        return
    for exc in failures:
        if isinstance(exc, LedgerWriteError):
            raise exc
    for exc in failures:
        if isinstance(exc, Exception):
            raise exc
    if len(failures) == 1:
        raise failures[0]
    raise BaseExceptionGroup("several tool calls raised", failures)


# -- result messages ---------------------------------------------------------------------------------
def _message_id(key: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, key))


def _tool_failed(sp: Any, call: ToolCallBlock, exc: BaseException) -> None:
    """Record on the tool span that the tool failed (its error answers the model, so the span
    keeps status UNSET: no error escapes it). Type only, never the message."""
    if sp.is_recording():
        code = getattr(exc, "error_code", None)
        sp.add_event(
            EVENT.TOOL_FAILED,
            {
                ATTR.TOOL_NAME: call.name,
                ATTR.TOOL_CALL_ID: call.id,
                ATTR.ERROR_TYPE: code if isinstance(code, str) else type(exc).__qualname__,
            },
        )


def _error_message(call: ToolCallBlock, key: str, text: str) -> Message:
    return Message.tool_message(
        f"Error: {text}",
        tool_call_id=call.id,
        message_id=_message_id(key),
        meta={"tool_name": call.name},
        is_error=True,
    )


def _answering(msg: Message, call: ToolCallBlock) -> Message:
    """``msg`` (a tool-role message from a tool) made to answer ``call``."""
    blocks = [
        b.model_copy(update={"tool_call_id": call.id})
        if isinstance(b, ToolResultBlock) and b.tool_call_id != call.id
        else b
        for b in msg.content
    ]
    return msg.model_copy(update={"tool_call_id": call.id, "content": blocks})


def _result_messages(value: Any, call: ToolCallBlock, key: str) -> list[Message]:
    """The messages answering ``call`` for the tool's return ``value``.

    A ``Message`` with ``role="tool"`` is made to answer the call (its ``tool_call_id`` set);
    other messages are kept as they are, after a tool message holding their text when none of
    the returned messages is a tool message (so the call is never left unanswered).
    """
    if isinstance(value, Message) or (
        isinstance(value, list) and value and all(isinstance(m, Message) for m in value)
    ):
        returned = [value] if isinstance(value, Message) else list(value)
        out = [_answering(m, call) if m.role == "tool" else m for m in returned]
        if not any(m.role == "tool" for m in out):
            text = "\n".join(m.text() for m in returned if m.text())
            out.insert(
                0,
                Message.tool_message(
                    text,
                    tool_call_id=call.id,
                    message_id=_message_id(key),
                    meta={"tool_name": call.name},
                ),
            )
        return out
    return [
        Message.tool_message(
            _to_content(value),
            tool_call_id=call.id,
            message_id=_message_id(key),
            meta={"tool_name": call.name},
        )
    ]


def _is_error_outcome(messages: list[Message]) -> bool:
    """Whether a call's answer reports a failure (an error tool result)."""
    return any(isinstance(b, ToolResultBlock) and b.is_error for m in messages for b in m.content)


#: Where a running tool's ``StreamEmitter`` puts its chunks (set by ``ToolNode.node_stream``
#: in the context of the calls; ``None``: no emitter, the tool gets ``emit=None``).
_EMIT_SINK: contextvars.ContextVar[Callable[[Any], None] | None] = contextvars.ContextVar(
    "tenxgraph_emit_sink", default=None
)


def _emitter(call: ToolCallBlock, config: dict[str, Any]) -> Any:
    """The ``StreamEmitter`` of a call, or ``None`` when nothing consumes the stream."""
    sink = _EMIT_SINK.get()
    if sink is None:
        return None
    from tenxgraph.core.state.stream_emitter import StreamEmitter

    run = current_run()
    thread = config.get("thread_id")
    run_id = config.get("run_id")
    return StreamEmitter(
        call.name,
        call.id,
        run.node if run is not None else "",
        None if thread is None else str(thread),
        None if run_id is None else str(run_id),
        sink,
        run.step if run is not None else 0,
    )


async def _fence_before_call(run: RunContext | None) -> int | None:
    """The run lease's fencing token, confirmed just before a tool call (issue 29: a run
    whose lease lapsed, e.g. a process paused longer than ``lease_ttl_s`` while another run
    took the thread over, must not make a call the new holder makes too). Free while the
    lease was renewed recently; see ``RunLease.check_held``. ``None`` without a lease.

    Raises:
        StaleStateError: ``STORAGE_CONFLICT_000`` with ``context["fence"]`` when the lease
            lapsed: the call is not made.
    """
    if run is None or run.lease is None:
        return None
    return await run.lease.check_held(int(run.config.get("_checkpoint_version") or 0))


async def _live(
    node: ToolNode, state: Any, config: dict[str, Any] | None
) -> AsyncGenerator[Any, None]:
    """Run ``node``'s calls in an asyncio task and yield their progress chunks as they come,
    then ``[result]``. The task gets a copy of this context (the run, the sink); it is
    cancelled, and awaited (shielded, at most 10 s), if this generator is closed early."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    loop_thread = threading.get_ident()

    def send(chunk: Any) -> None:
        if threading.get_ident() == loop_thread:
            queue.put_nowait(chunk)
        else:  # a sync tool in a worker thread
            loop.call_soon_threadsafe(queue.put_nowait, chunk)

    ctx = contextvars.copy_context()
    ctx.run(_EMIT_SINK.set, send)
    task = loop.create_task(node(state, config), context=ctx)
    try:
        while not task.done():
            getter = loop.create_task(queue.get())
            try:
                await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                yield getter.result()
        while not queue.empty():
            yield queue.get_nowait()
        result = task.result()
    finally:
        if not task.done():
            task.cancel()
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await asyncio.wait({task})
    yield [result]


async def _tool_event(
    call: ToolCallBlock,
    phase: str,
    failed: bool = False,
    exc: BaseException | None = None,
) -> None:
    """Publish a ``TOOL_EXECUTION`` event of a call that runs (not of a ledger replay):
    ``START`` before it, ``RESULT`` after it (``is_error`` when the model is answered with an
    error), ``ERROR`` when it stops the run. Arguments and results are not included."""
    from tenxgraph.core._publish import publish_in_run
    from tenxgraph.runtime.publisher.events import ContentType, Event, EventType

    data: dict[str, Any] = {"tool_name": call.name, "tool_call_id": call.id}
    if phase == "start":
        await publish_in_run(Event.TOOL_EXECUTION, EventType.START, ContentType.TOOL_CALL, **data)
    elif phase == "result":
        await publish_in_run(
            Event.TOOL_EXECUTION, EventType.RESULT, ContentType.TOOL_RESULT, is_error=failed, **data
        )
    else:
        await publish_in_run(
            Event.TOOL_EXECUTION,
            EventType.ERROR,
            ContentType.ERROR,
            error_type=type(exc).__name__,
            error_code=getattr(exc, "error_code", None),
            **data,
        )


def _services(spec: ToolSpec) -> dict[str, Any]:
    """The ``Inject[T]`` arguments of a tool, from the running graph's InjectQ container
    (InjectQ's current one outside a graph).

    Raises:
        GraphError: ``GRAPH_001`` when a non-optional service is not bound.
    """
    from ._inject import resolve

    run = current_run()
    builder = getattr(getattr(run, "graph", None), "builder", None)
    return resolve(builder, spec.di, f"tool {spec.name!r}")


def _tool_callbacks(
    call: ToolCallBlock, spec: ToolSpec, manager: Any = None
) -> tuple[Any, Any, dict[str, Any]]:
    """``(manager, context, input)`` for the callbacks of this call (``TOOL``, or ``SKILL``
    for the skill tools of ``tenxgraph.core.skills.activation``) of ``manager`` or else the
    running graph's, or ``(None, None, input)`` when there are none."""
    data = {"name": call.name, "args": dict(call.args), "tool_call_id": call.id}
    run = current_run()
    cbm = manager or getattr(getattr(run, "graph", None), "callback_manager", None)
    if cbm is None:
        return None, None, data
    from tenxgraph.utils.callbacks import CallbackContext, InvocationType

    kind = (
        InvocationType.SKILL
        if getattr(spec.func, "__tenxgraph_skill_tool__", False) is True
        else InvocationType.TOOL
    )
    if not cbm.has_callbacks(kind):
        return None, None, data
    config = run.config if run is not None else {}
    ctx = CallbackContext(
        invocation_type=kind,
        node_name=run.node if run is not None else "",
        function_name=call.name,
        metadata={
            "thread_id": config.get("thread_id"),
            "run_id": config.get("run_id"),
            "tool_call_id": call.id,
        },
    )
    return cbm, ctx, data


def _only(messages: list[Message]) -> _Outcome:
    return messages, {}, None


def _bad_state_keys(updates: dict[str, Any], state: Any) -> list[str]:
    """Keys of a ``ToolResult.state`` that are not updatable fields of the graph state."""
    fields = getattr(type(state), "model_fields", None)
    if not isinstance(updates, dict):
        return ["(not a dict)"]
    return sorted(
        str(k)
        for k in updates
        if k in ("context", "execution_meta") or (fields is not None and k not in fields)
    )


def _typed_updates(updates: dict[str, Any], state: Any) -> dict[str, Any]:
    """Recorded ``ToolResult`` updates validated to the state's field types (the ledger
    holds their JSON form: a date comes back as a date, a model as a model)."""
    fields = getattr(type(state), "model_fields", None)
    if not updates or fields is None:
        return dict(updates)
    out: dict[str, Any] = {}
    for k, v in updates.items():
        info = fields.get(k)
        out[k] = pydantic.TypeAdapter(info.annotation).validate_python(v) if info is not None else v
    return out


def _decode(data: bytes, thread_id: Any = None) -> _Outcome:
    """The outcome of a ledger ``result`` (format ``{"v": 1, "messages": [...], "state"?: {...},
    "goto"?: str}``): the tool's messages, its state updates and its handoff target.

    Raises:
        SerializationError: ``STORAGE_SERIALIZATION_000`` when the bytes are not in that format
            (``context``: ``thread_id``, ``path``; treated as a failed ledger read).
    """
    tid = None if thread_id is None else str(thread_id)
    obj = serde.decode_payload(data, thread_id=tid, what="ledger result")
    if (
        not isinstance(obj, dict)
        or obj.get("v") != _LEDGER_FORMAT
        or not isinstance(obj.get("messages"), list)
    ):
        raise SerializationError(
            f"the stored ledger result of thread {tid!r} is not a tenxgraph ledger result",
            context={"thread_id": tid, "version": None, "path": "$", "type": type(obj).__name__},
        )
    out: list[Message] = []
    for i, m in enumerate(obj["messages"]):
        try:
            out.append(Message.model_validate(m))
        except Exception:  # noqa: BLE001 - pydantic errors of a damaged entry
            raise SerializationError(
                f"message {i} of a stored ledger result of thread {tid!r} cannot be decoded",
                context={
                    "thread_id": tid,
                    "version": None,
                    "path": f"$.messages[{i}]",
                    "type": "ValidationError",
                },
            ) from None
    updates = obj.get("state") or {}
    goto = obj.get("goto")
    return (
        out,
        dict(updates) if isinstance(updates, dict) else {},
        goto if isinstance(goto, str) else None,
    )
