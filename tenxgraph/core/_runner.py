"""The step loop: one node at a time, a durable checkpoint after each.

A run is an async generator of ``StreamChunk`` s ending with one ``RunResult``;
``ainvoke`` drains it and keeps the result, ``astream`` hands the chunks to the caller.

Durability (DESIGN section 3): after every node the new state is written as the thread's next
version by compare-and-swap against the version this run last read or wrote, with
``execution_meta.current_node`` naming the next node to run and status ``running`` (``completed``
at ``END``). A process killed at any point therefore replays at most the one node that was
running. With ``durable_checkpoint_every_step=False`` only the end of the run is written, plus
any step whose new messages include tool calls (so a model's answer is durable before its tools
run, and a replay sees the same calls), plus pauses and errors.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry.trace import INVALID_SPAN
from pydantic import BaseModel

from tenxgraph.core._context import _RUN, RunContext
from tenxgraph.core.config import RunConfig, normalize_config
from tenxgraph.core.exceptions import (
    GraphError,
    GraphRecursionError,
    InterruptPendingError,
    NodeTimeoutError,
    TenxGraphError,
    ValidationError,
)
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.agent_state import reducers_of
from tenxgraph.core.state.execution import UNFINISHED, ExecutionStatus
from tenxgraph.core.state.message_block import ToolCallBlock, ToolResultBlock
from tenxgraph.core.state.reducers import MessageList, add_messages, replace_messages
from tenxgraph.core.state.stream_chunks import StreamChunk, StreamEvent
from tenxgraph.runtime.publisher.events import Event, EventType
from tenxgraph.telemetry import (
    ATTR,
    EVENT,
    SPAN,
    enabled,
    record_error,
    start_span,
    use_span,
    user_digest,
)
from tenxgraph.utils.command import Command
from tenxgraph.utils.constants import END, START, ResponseGranularity
from tenxgraph.utils.interrupts import GraphInterrupt

from ._deadline import NodeDeadline
from ._input_validation import validate_input
from ._lease import RunLease, rollback_target, strategy_of
from ._publish import publish_event
from ._run_metrics import node_finished
from .graph.node import call_with_params
from .graph.tool_node import pending_tool_calls

if TYPE_CHECKING:
    from tenxgraph.records import Loaded

    from ._lifecycle import LifecycleHooks
    from .graph.compiled_graph import CompiledGraph

__all__ = ["GraphInterrupt", "RunResult", "apply_update", "normalize_return", "run_graph"]

log = logging.getLogger("tenxgraph.runner")

_M = TypeVar("_M", bound=BaseModel)

#: Seconds between two reads of the durable stop flag during a run (the in-process flag is
#: checked between every two nodes for free).
STOP_POLL_S = 1.0

_PAUSED = (
    ExecutionStatus.INTERRUPTED,
    ExecutionStatus.INTERRUPTED_BEFORE,
    ExecutionStatus.INTERRUPTED_AFTER,
)


class RunResult:
    """The last item a run yields: the result dict ``invoke`` returns and the state reached.

    Attributes:
        data: the result dict (see ``CompiledGraph.ainvoke``).
        state: the state at the end of the run (as checkpointed).
    """

    __slots__ = ("data", "state")

    def __init__(self, data: dict[str, Any], state: AgentState) -> None:
        self.data = data
        self.state = state


# -- node return values -------------------------------------------------------------------------
def _as_message(item: Any, node: str) -> Message:
    if isinstance(item, Message):
        return item
    if isinstance(item, str):
        return Message.text_message(item, role="assistant")
    raise GraphError(
        f"node {node!r} returned a list holding {type(item).__name__}; a list may hold Message "
        "or str only",
        error_code="GRAPH_005",
        context={"node": node},
    )


def _messages_from(value: Any, node: str, field: str) -> list[Message]:
    """Messages of a ``"messages"`` / ``"context"`` value: ``Message``, ``str`` (an assistant
    message) or a message dict (as ``model_dump()`` gives), alone or in a list."""
    items = value if isinstance(value, (list, tuple)) else [value]
    out: list[Message] = []
    for i, m in enumerate(items):
        if isinstance(m, dict):
            try:
                out.append(Message.model_validate(m))
            except Exception as exc:  # pydantic ValidationError
                raise ValidationError(
                    f"node {node!r} returned an invalid message in {field}[{i}]: {exc}",
                    context={"field": f"{field}[{i}]", "node": node},
                ) from None
        else:
            out.append(_as_message(m, node))
    return out


def state_patch(patch: Any, state_cls: type[AgentState], where: str) -> dict[str, Any]:
    """Field updates from a ``"state"`` dict (in a run's input or a node's returned dict).

    Each key is a state field, applied through its reducer; ``context`` holds messages
    (appended by ``add_messages``: known ids are skipped, so a ``model_dump()`` of the current
    state adds nothing twice); ``execution_meta`` belongs to the runtime and is dropped (a
    ``model_dump()`` carries it).

    Raises:
        ValidationError: ``VALIDATION_000`` for a non-dict, an unknown field or a bad message.
    """
    if isinstance(patch, AgentState):
        patch = {k: getattr(patch, k) for k in type(patch).model_fields}
    if not isinstance(patch, dict):
        raise ValidationError(
            f"{where}['state'] must be a dict of state fields, got {type(patch).__name__}",
            context={"field": "state"},
        )
    fields = state_cls.model_fields
    out: dict[str, Any] = {}
    for k, v in patch.items():
        if k == "execution_meta":
            continue
        if k == "context":
            out["context"] = _messages_from(v, where, "state.context")
        elif k in fields:
            out[k] = v
        else:
            raise ValidationError(
                f"{where}['state'] names unknown state field {k!r}",
                context={"field": f"state.{k}"},
            )
    return out


def node_updates(ret: Any, state: AgentState, node: str) -> tuple[list[dict[str, Any]], str | None]:
    """Turn a node's return value into updates to apply in order, and the ``goto``.

    ``Command(state=S, update=U, goto=G)`` gives ``[updates of S, updates of U]`` and ``G``.

    Raises:
        GraphError: ``GRAPH_005`` for an unsupported type, or ``Command(graph=...)`` naming
            another graph (tenxgraph graphs do not nest).
        ValidationError: ``VALIDATION_000`` for a dict key that is not a state field.
    """
    if type(ret) is Message:  # the usual return: one message (what normalize_return gives)
        return [{"context": [ret]}], None
    if isinstance(ret, Command):
        # Graphs do not nest: the graph a node runs in is the outermost one, which is its
        # own parent, so Command.PARENT routes within it (the handoff pages' usage).
        if ret.graph is not None and ret.graph != Command.PARENT:
            raise GraphError(
                f"node {node!r} returned Command(graph={ret.graph!r}); tenxgraph graphs do not "
                "nest: use graph=None or Command.PARENT (both route within this graph)",
                error_code="GRAPH_005",
                context={"node": node, "graph": str(ret.graph)},
            )
        out: list[dict[str, Any]] = []
        if ret.state is not None:
            out.append(normalize_return(ret.state, state, node)[0])
        out.append(normalize_return(ret.update, state, node)[0])
        return out, ret.goto
    upd, goto = normalize_return(ret, state, node)
    return [upd], goto


def normalize_return(ret: Any, state: AgentState, node: str) -> tuple[dict[str, Any], str | None]:
    """Turn a node's return value into ``({field: value}, goto)``.

    Supported: ``None``, ``str`` (an assistant message), ``Message``, a list of those, a ``dict``
    of field updates (key ``"messages"`` appends to ``context``; key ``"state"`` holds a dict
    of field values, see ``state_patch``), a state object (its fields replace the current
    ones), ``Command(update=..., goto=...)`` (its ``state`` is ignored here: see
    ``node_updates``).

    Raises:
        GraphError: ``GRAPH_005`` for any other type.
        ValidationError: ``VALIDATION_000`` for a dict key that is not a state field.
    """
    goto = None
    if isinstance(ret, Command):
        goto = ret.goto
        ret = ret.update
    if ret is None:
        return {}, goto
    if isinstance(ret, (str, Message)):
        return {"context": [_as_message(ret, node)]}, goto
    if isinstance(ret, list):
        return {"context": [_as_message(m, node) for m in ret]}, goto
    if isinstance(ret, AgentState):
        fields = type(state).model_fields
        upd = {
            k: getattr(ret, k)
            for k in type(ret).model_fields
            if k in fields and k != "execution_meta"
        }
        upd["__replace__"] = True
        return upd, goto
    if isinstance(ret, dict):
        fields = type(state).model_fields
        upd = {}
        if "state" in ret and "state" not in fields:
            upd.update(state_patch(ret["state"], type(state), f"node {node!r} returned"))
        for k, v in ret.items():
            if k == "messages":
                upd["context"] = list(upd.get("context", [])) + _messages_from(v, node, "messages")
            elif k == "state" and "state" not in fields:
                continue
            elif k in fields and k != "execution_meta":
                upd[k] = v
            else:
                raise ValidationError(
                    f"node {node!r} returned an update for unknown state field {k!r}",
                    context={"field": k, "node": node},
                )
        return upd, goto
    raise GraphError(
        f"node {node!r} returned {type(ret).__name__}; return None, str, Message, a list of them, "
        "a dict of field updates, a state object or Command",
        error_code="GRAPH_005",
        context={"node": node, "type": type(ret).__name__},
    )


def apply_update(state: AgentState, update: dict[str, Any]) -> tuple[AgentState, list[Message]]:
    """Merge ``update`` into ``state`` through each field's reducer.

    Returns:
        ``(new_state, new_messages)``: a new state object (``state`` is not modified) and the
        messages that entered ``context`` (oldest first).

    Raises:
        ValidationError: ``VALIDATION_000`` when a value fails the field's type.
    """
    if not update:
        return state, []
    replace = update.pop("__replace__", False)
    # Run input is appended whatever the context field's reducer (DESIGN 1: "the input's
    # messages are appended to context"), also on states annotated with replace_messages.
    append = update.pop("__append__", False)
    cls = type(state)
    reducers = reducers_of(cls)
    changes: dict[str, Any] = {}
    probe: AgentState | None = None
    old_ctx = state.context
    for name, value in update.items():
        if name == "context":
            msgs = value if isinstance(value, list) else [value]
            for m in msgs:
                if not isinstance(m, Message):
                    raise ValidationError(
                        f"context takes Message objects, got {type(m).__name__}",
                        context={"field": "context"},
                    )
            if replace:
                changes[name] = (
                    msgs
                    if isinstance(msgs, MessageList) and msgs is old_ctx
                    else replace_messages(None, msgs)
                )
            elif append:
                changes[name] = add_messages(old_ctx, msgs)
            else:
                changes[name] = reducers[name](old_ctx, msgs)
            continue
        new_value = value if replace else reducers[name](getattr(state, name), value)
        try:
            # A shallow copy as the validation target: ``model_construct()`` would run every
            # default factory (and pydantic inspects their signatures), ~1 ms per node.
            if probe is None:
                probe = _copy_with(state, {})
            cls.__pydantic_validator__.validate_assignment(probe, name, new_value)
            new_value = getattr(probe, name)
        except Exception as exc:  # pydantic's ValidationError
            raise ValidationError(
                f"invalid value for state field {name!r}: {exc}", context={"field": name}
            ) from None
        changes[name] = new_value
    new_state = _copy_with(state, changes)
    new_ctx = new_state.context
    if new_ctx is old_ctx:
        return new_state, []
    if (
        isinstance(new_ctx, MessageList)
        and isinstance(old_ctx, MessageList)
        and new_ctx.lineage is old_ctx.lineage
        and len(new_ctx) >= len(old_ctx)
    ):
        return new_state, new_ctx[len(old_ctx) :]  # a slice of a list subclass is a new list
    old_ids = {m.message_id for m in old_ctx}
    return new_state, [m for m in new_ctx if m.message_id not in old_ids]


_set = object.__setattr__


def _copy_with(model: _M, changes: dict[str, Any]) -> _M:
    """``model.model_copy(update=changes)``, without its generic steps: a shallow copy whose
    fields in ``changes`` are replaced (not validated) and counted as set.

    Falls back to ``model_copy`` for a model that keeps extra fields (``extra="allow"``) or
    private attributes.
    """
    if getattr(model, "__pydantic_private__", None) is not None or (
        model.__pydantic_extra__ is not None
    ):
        return model.model_copy(update=changes)
    cls = type(model)
    copied = cls.__new__(cls)
    values = model.__dict__.copy()
    if changes:
        values.update(changes)
        fields_set = model.__pydantic_fields_set__ | changes.keys()
    else:
        fields_set = set(model.__pydantic_fields_set__)
    _set(copied, "__dict__", values)
    _set(copied, "__pydantic_extra__", None)
    _set(copied, "__pydantic_fields_set__", fields_set)
    _set(copied, "__pydantic_private__", None)
    return copied


def _with_meta(state: AgentState, **fields: Any) -> AgentState:
    return _with_meta_dict(state, fields)


def _with_meta_dict(state: AgentState, fields: dict[str, Any]) -> AgentState:
    """``state`` with ``execution_meta`` updated by ``fields`` (both shallow copies)."""
    meta = _copy_with(state.execution_meta, fields)
    return _copy_with(state, {"execution_meta": meta})


def _has_tool_calls(msgs: list[Message]) -> bool:
    # ``m.tool_calls()`` is non-empty exactly when ``tools_calls`` is set or a content block
    # is a ToolCallBlock; tested here without building the list
    for m in msgs:
        if m.role == "assistant" and (
            m.tools_calls or any(isinstance(b, ToolCallBlock) for b in m.content)
        ):
            return True
    return False


# -- input --------------------------------------------------------------------------------------
def parse_input(
    input_data: Any, state_cls: type[AgentState]
) -> tuple[list[Message], dict[str, Any], Any, bool]:
    """Validate a run's input before anything is written.

    Returns:
        ``(messages, field_updates, resume_value, has_resume)``.

    Raises:
        ValidationError: ``VALIDATION_000`` for a non-dict input, an unknown key, or a message
            that is not valid (e.g. an unknown role).
    """
    if input_data is None:
        return [], {}, None, False
    if isinstance(input_data, AgentState):
        raise ValidationError(
            "pass {'messages': [...]} as input, not a state object", context={"field": "input"}
        )
    if not isinstance(input_data, dict):
        raise ValidationError(
            f"input must be a dict like {{'messages': [...]}}, got {type(input_data).__name__}",
            context={"field": "input"},
        )
    msgs: list[Message] = []
    updates: dict[str, Any] = {}
    fields = state_cls.model_fields
    for k, v in input_data.items():
        if k == "messages":
            items = v if isinstance(v, (list, tuple)) else [v]
            for i, m in enumerate(items):
                if isinstance(m, Message):
                    msgs.append(m)
                    continue
                try:
                    if isinstance(m, str):
                        msgs.append(Message.text_message(m))
                    else:
                        msgs.append(Message.model_validate(m))
                except Exception as exc:  # pydantic ValidationError
                    raise ValidationError(
                        f"input message {i} is not valid: {exc}",
                        context={"field": f"messages[{i}]"},
                    ) from None
            _refuse_repeated_ids(msgs)
        elif k == "resume":
            continue
        elif k == "state" and "state" not in fields:
            patch = state_patch(v, state_cls, "input")
            msgs.extend(patch.pop("context", []))
            updates.update(patch)
        elif k in fields and k not in ("execution_meta", "context"):
            updates[k] = v
        else:
            raise ValidationError(
                f"unknown input key {k!r}; use 'messages', 'state' (a dict of state fields), "
                "'resume' or a state field",
                context={"field": k},
            )
    return msgs, updates, input_data.get("resume"), "resume" in input_data


def _refuse_repeated_ids(msgs: list[Message]) -> None:
    """Refuse one input that carries two messages with the same ``message_id``.

    ``add_messages`` skips an id it already holds, so the second message would vanish without
    a word; two different messages must have two ids.

    Raises:
        ValidationError: ``VALIDATION_000`` naming the repeated id's position.
    """
    seen: set[str] = set()
    for i, m in enumerate(msgs):
        key = str(m.message_id)
        if key in seen:
            raise ValidationError(
                f"input messages[{i}] repeats message_id {key!r} of an earlier input message; "
                "give each message its own id",
                context={"field": f"messages[{i}]"},
            )
        seen.add(key)


# -- the run ------------------------------------------------------------------------------------
class _Run:
    """Mutable bookkeeping of one invocation (not shared across tasks)."""

    def __init__(
        self,
        graph: CompiledGraph[Any],
        rc: RunConfig,
        granularity: ResponseGranularity = ResponseGranularity.LOW,
    ) -> None:
        self.graph = graph
        self.granularity = granularity
        #: whether the chunks are consumed (``astream``) or dropped (``ainvoke``)
        self.stream = True
        self.rc = rc
        self.cp = graph.checkpointer
        self.key = self.cp.key_for(rc.raw)
        self.prev: Loaded | None = None
        self.state: AgentState | None = None
        self.produced: list[Message] = []
        self.executed = 0
        self.dirty = False
        #: UNIX time the run started: only stop requests made at or after it are honoured
        #: (one made while no run was running, or for an earlier run, is not this run's).
        self.started_at = time.time()
        self.last_stop_poll = time.monotonic()
        self.ctx = RunContext(self.cp, rc.raw, self.key, nodes=graph.node_objects, graph=graph)
        self.span: Any = None
        # Messages produced by finishing an earlier, cut-off run before this run's input.
        self.resumed_count = 0
        #: graph lifecycle hooks (``compile(lifecycle_hook=...)``), ``None`` without any
        self.hooks: LifecycleHooks | None = graph.lifecycle_hooks
        self.hooks_started = False
        self.error_hooked = False
        self.lifecycle_ctx: Any = None
        #: the lifecycle hook method that raised (``_lifecycle``): the run fails like a node
        self.failed_hook: str | None = None
        #: whether the error state of this run was checkpointed already
        self.error_saved = False
        #: the thread's run lease while this run holds it (docs/how-to/run-lease.md)
        self.lease: RunLease | None = None
        #: whether a checkpoint with a final status (not ``running``) ends this run, so that
        #: its write may release the lease (false while finishing an earlier run first)
        self.may_release = True
        #: the ``node_timeout`` deadline of this run's nodes (``None``: no timeout)
        self.deadline = None if rc.node_timeout is None else NodeDeadline(rc.node_timeout)

    async def commit(self, state: AgentState) -> None:
        # a raising on_checkpoint is not asked again for the error checkpoint it caused
        if self.hooks is not None and self.failed_hook != "on_checkpoint":
            state = await self.hooks.checkpoint(
                self, state, None if self.prev is None else self.prev.state
            )
        # -- run lease: every write carries the fence; the run's last one releases the lease
        lease = self.lease
        fence = None if lease is None else lease.fence
        release = (
            fence is not None
            and self.may_release
            and state.execution_meta.status != ExecutionStatus.RUNNING
        )
        if lease is not None:
            await lease.renew_now()
        # The call as it always was (applications wrap ``acommit(config, state, prev)``, as
        # examples/tracing.py does to simulate a crash): lease arguments only with a lease.
        if fence is None and self.span is INVALID_SPAN:  # no lease, no run span to enter
            self.prev = await self.cp.acommit(self.rc.raw, state, self.prev)
        else:
            with use_span(self.span):
                if fence is None:
                    self.prev = await self.cp.acommit(self.rc.raw, state, self.prev)
                else:
                    self.prev = await self.cp.acommit(
                        self.rc.raw, state, self.prev, fence=fence, release=release
                    )
        if lease is not None and fence is not None:
            lease.wrote()
        if release and lease is not None:
            lease.released_by_write()
        self.state = self.prev.state
        self.dirty = False

    def stop_check_due(self) -> bool:
        """Whether :meth:`stop_requested` has anything to look at now: an in-process request
        for this thread, or the durable flag's poll is due (a cheap test, no await)."""
        stops = self.graph._local_stops
        return (bool(stops) and self.key in stops) or (
            time.monotonic() - self.last_stop_poll >= STOP_POLL_S
        )

    async def stop_requested(self) -> bool:
        """Whether a stop was requested since this run started: the in-process request (free,
        checked every time) or, at most once per ``STOP_POLL_S``, the durable one (one read)."""
        local = self.graph._local_stops.get(self.key)
        if local is not None and local >= self.started_at:
            del self.graph._local_stops[self.key]
            return True
        now = time.monotonic()
        if now - self.last_stop_poll >= STOP_POLL_S:
            self.last_stop_poll = now
            try:
                return await self.cp.aget_stop(self.rc.raw, since=self.started_at)
            except TenxGraphError as exc:
                log.warning("could not read the stop flag of a thread: %s", exc.error_code)
        return False


def _chunk(run: _Run, event: StreamEvent, **kw: Any) -> StreamChunk | None:
    """A chunk for ``astream``; ``None`` for ``ainvoke``, which drops every chunk (a few
    microseconds saved per chunk, several chunks per step)."""
    if not run.stream:
        return None
    return StreamChunk.fast(event, thread_id=run.rc.thread_id, run_id=run.rc.run_id, **kw)


def _pause_chunk(run: _Run, state: AgentState, node: str, kind: str) -> StreamChunk | None:
    """The ``updates`` chunk announcing a pause: ``kind`` is ``"interrupt"`` (``interrupt()``),
    ``"before"`` or ``"after"`` (``interrupt_before`` / ``interrupt_after``)."""
    meta = state.execution_meta
    return _chunk(
        run,
        StreamEvent.UPDATES,
        data={
            "node": node,
            "status": str(meta.status),
            "interrupt_type": kind,
            "interrupts": list((meta.interrupt_data or {}).get("interrupts", [])),
        },
        metadata={"node": node, "step": meta.step},
    )


def _result(
    run: _Run, granularity: ResponseGranularity, input_msgs: list[Message]
) -> dict[str, Any]:
    state = run.state
    assert state is not None
    done = run.resumed_count
    out: dict[str, Any] = {"messages": run.produced[:done] + list(input_msgs) + run.produced[done:]}
    if granularity in (ResponseGranularity.PARTIAL, ResponseGranularity.FULL):
        out["context"] = list(state.context)
        # The reference page's key (the concepts page says ``context_summary``).
        out["summary"] = state.context_summary
    if granularity == ResponseGranularity.FULL:
        out["state"] = state
    meta = state.execution_meta
    if meta.status in _PAUSED:
        out["interrupted"] = True
        out["interrupt"] = {
            "node": meta.interrupt_node,
            "reason": meta.interrupt_reason,
            "status": str(meta.status),
            "data": meta.interrupt_data,
        }
    return out


async def _route(
    graph: CompiledGraph[Any],
    node: str,
    state: AgentState,
    config: dict[str, Any],
    goto: str | None,
) -> str:
    if goto:
        if goto != END and goto not in graph.node_objects:
            raise GraphError(
                f"node {node!r} returned Command(goto={goto!r}), which is not a node",
                error_code="GRAPH_006",
                context={"node": node, "goto": goto},
            )
        return goto
    ce = graph.builder.conditional_edges.get(node)
    if ce is not None:
        try:
            key = await call_with_params(ce.condition, state, config)
        except TenxGraphError:
            raise
        except Exception as exc:
            raise GraphError(
                f"the router of node {node!r} raised {type(exc).__name__}: {exc}",
                error_code="GRAPH_ROUTING_001",
                context={"node": node},
            ) from exc
        target = ce.path_map.get(key, None) if ce.path_map else key
        if target is None and ce.path_map and key in (END, None):
            target = END
        if target != END and target not in graph.node_objects:
            raise GraphError(
                f"the router of node {node!r} returned {key!r}, which maps to no node",
                error_code="GRAPH_006",
                context={"node": node, "key": str(key)},
            )
        return target
    return graph.builder.edges.get(node, END)


async def run_graph(
    graph: CompiledGraph[Any],
    input_data: Any,
    config: dict[str, Any] | None,
    granularity: ResponseGranularity = ResponseGranularity.LOW,
    stream: bool = True,
    rc: RunConfig | None = None,
) -> AsyncGenerator[StreamChunk | RunResult | None, None]:
    """Execute one invocation; yields stream chunks (when ``stream`` is false, only a few
    ``None`` in their place) and last a ``RunResult``.

    ``rc``: the validated view of ``config`` when the caller made it already (``_drive``
    does, through ``prepare_run_config``); else ``config`` is validated here.

    Raises:
        ConfigError, ValidationError: bad config or input, before anything is written.
        InterruptPendingError: ``GRAPH_008``: new input on a thread waiting for an ``interrupt()`` answer.
        StaleStateError: another run wrote the thread first (nothing of this step is visible).
        GraphRecursionError, NodeTimeoutError, GraphError: see their docs; the state reached
            is checkpointed with status ``error`` first.
    """
    if config is None:
        config = {}
    if rc is None or rc.raw is not config:
        rc = normalize_config(config, require_thread=False, new_run=not config.get("run_id"))
    state_cls = graph.state_class
    input_msgs, field_updates, resume_value, has_resume = parse_input(input_data, state_cls)
    run = _Run(graph, rc, granularity)
    run.stream = stream
    run.ctx.stream = stream
    # Started, not made current: the run is an async generator, and a span current across
    # its yields would leak into the consumer's context. Each piece of work enters it with
    # use_span instead.
    run_span = start_span(
        SPAN.RUN,
        attributes={
            ATTR.THREAD_ID: rc.thread_id,
            ATTR.RUN_ID: rc.run_id,
            ATTR.USER_DIGEST: user_digest(rc.user_id),
        }
        if enabled()
        else None,
    )
    run.span = run_span
    await _publish(run, Event.GRAPH_EXECUTION, EventType.START)
    try:
        async for chunk in _run_body(
            run, input_msgs, field_updates, resume_value, has_resume, granularity
        ):
            yield chunk
    except BaseException as exc:
        record_error(run_span, exc)
        if isinstance(exc, Exception):
            if (
                run.failed_hook not in (None, "on_graph_start", "on_resume")
                and not run.error_saved
                and run.state is not None
            ):
                # a raising lifecycle hook fails the run like a node error (one refusing the
                # start or the resume leaves the thread as it was: nothing of the run ran)
                meta = run.state.execution_meta
                await _save_error(run, run.state, meta.current_node or run.ctx.node or "", exc)
            if run.hooks is not None and run.hooks_started and not run.error_hooked:
                await _hook_error(run, exc, run.state, run.ctx.node or "", persist=False)
            await _publish(run, Event.GRAPH_EXECUTION, EventType.ERROR, **_error_data(exc))
        raise
    else:
        status = run.state.execution_meta.status if run.state is not None else None
        paused = status in _PAUSED
        await _publish(
            run,
            Event.GRAPH_EXECUTION,
            EventType.INTERRUPTED if paused else EventType.END,
            status=str(status) if status is not None else None,
        )
    finally:
        # -- run lease: released here when the run's last write did not release it
        if run.deadline is not None:
            run.deadline.close()
        if run.lease is not None:
            await run.lease.release()
        run_span.end()


class _Nothing:
    """An awaitable that completes at once without yielding (on any event loop)."""

    __slots__ = ()

    def __await__(self) -> Any:
        return iter(())


_NOTHING = _Nothing()


def _publish(
    run: _Run, event: Event, event_type: EventType, node: str | None = None, **data: Any
) -> Any:
    """Publish one event of this run to the graph's publisher (``compile(publisher=...)``);
    without a publisher, an awaitable that does nothing (no coroutine is made)."""
    publisher = getattr(run.graph, "publisher", None)
    if publisher is None:
        return _NOTHING
    return publish_event(
        publisher,
        event,
        event_type,
        run.rc.thread_id,
        run.rc.run_id,
        node,
        data,
    )


def _error_data(exc: BaseException) -> dict[str, Any]:
    return {"error_type": type(exc).__name__, "error_code": getattr(exc, "error_code", None)}


async def _run_body(
    run: _Run,
    input_msgs: list[Message],
    field_updates: dict[str, Any],
    resume_value: Any,
    has_resume: bool,
    granularity: ResponseGranularity,
) -> AsyncGenerator[StreamChunk | RunResult | None, None]:
    graph, rc, state_cls, run_span = run.graph, run.rc, run.graph.state_class, run.span
    if input_msgs and graph.media_store is not None:
        from tenxgraph.storage.media.offload import ensure_media_offloaded

        for m in input_msgs:  # before anything is written: checkpoints keep references only
            await ensure_media_offloaded(m, graph.media_store)
    if input_msgs and graph.callback_manager is not None:
        await validate_input(run.ctx, graph, input_msgs)  # before anything is read or written
    has_new_input = bool(input_msgs or field_updates)
    # -- run lease: with a multitask strategy (or an answer to a pause, which always takes
    # it), the first read takes the lease in the same round trip
    strategy = strategy_of(rc.raw, run.cp)
    # an explicit resume (an answer to a pause, or no input at all) waits for the lease
    # whatever the strategy: it is never refused nor stops the run it waits for
    explicit_resume = has_resume or not has_new_input
    if strategy is not None or (has_resume and run.cp.store is not None):
        await _take_lease(run, "resume" if strategy is None or explicit_resume else strategy)
    else:
        await _load(run)
    assert run.state is not None
    meta = run.state.execution_meta
    # -- run lease: a resume takes the lease whatever the strategy (and reads again once held)
    if (
        run.lease is None
        and run.cp.store is not None
        and _resumes(graph, meta, has_new_input, has_resume)
    ):
        await _take_lease(run, "resume")
        meta = run.state.execution_meta
    # -- run lease: interrupt / rollback settle the run they stopped
    skip_unfinished = False
    if run.lease is not None and run.lease.stop_requested:
        target = None
        if strategy == "rollback":
            target = await rollback_target(run.cp, rc.raw, run.state, state_cls, graph.new_state)
        if target is not None:
            # A new version holding the state from before the stopped run (its own versions
            # stay in history), marked finished so that nothing of the stopped run resumes.
            restored = _with_meta(
                target.model_copy(update={"execution_meta": meta}),
                status=ExecutionStatus.COMPLETED,
                current_node=END,
                interrupt_node=None,
                interrupt_reason=None,
                interrupt_data=None,
                error=None,
                internal_data={},
            )
            run.may_release = False  # this write does not end the run
            await run.commit(restored)
            run.may_release = True
            assert run.state is not None
            meta = run.state.execution_meta
        elif meta.status == ExecutionStatus.STOPPED:
            skip_unfinished = True
        if meta.status == ExecutionStatus.STOPPED:
            # The stopped run may have stopped between its model's tool calls and their tool
            # node: answer those calls before this run's input goes after them.
            await _answer_stopped_calls(run, strategy or "interrupt")
            meta = run.state.execution_meta

    # 0. Idempotent turns: an input made of messages that a run of this thread already consumed
    # (by message_id) is a client's retry; it gets that run's result, the graph does not run
    # again. A finished or paused run answers at once; a cut-off or stopped one is finished
    # first (below). See docs/idempotent-turns.md.
    retry = (
        run.prev is not None
        and bool(input_msgs)
        and not field_updates
        and not has_resume
        and _earlier_turn(run.state.context, input_msgs) is not None
    )
    if retry and (meta.status == ExecutionStatus.COMPLETED or meta.status in _PAUSED):
        async for ch in _already_processed(run, input_msgs, granularity):
            yield ch
        return

    # 1. A pause made by interrupt() must be answered, not silently discarded. A static pause
    # (interrupt_before / interrupt_after) takes new input: it is the human's reply, appended
    # before the paused run goes on (10xGraph's stream guide resumes it that way).
    if meta.status == ExecutionStatus.INTERRUPTED and has_new_input and not has_resume:
        pending = (meta.interrupt_data or {}).get("interrupts", [])
        raise InterruptPendingError(
            f"thread {rc.thread_id!r} is paused at node {meta.interrupt_node!r} "
            f"({meta.status}); answer it with invoke({{'resume': answer}}, config), or edit it "
            "with update_state",
            context={
                "thread_id": rc.thread_id,
                "node": meta.interrupt_node,
                "interrupt_ids": [p["id"] for p in pending],
            },
        )

    # A pause made by interrupt() waits for an answer: without one, re-running the node would
    # only ask again (and write a version); report the pause unchanged instead.
    if meta.status == ExecutionStatus.INTERRUPTED and not has_resume:
        yield RunResult(_result(run, granularity, []), run.state)
        return

    def input_update() -> dict[str, Any]:
        update: dict[str, Any] = dict(field_updates)
        if input_msgs:
            update["context"] = input_msgs
            update["__append__"] = True
        return update

    # 2. Finish an unfinished run first (crash, stop, pause being resumed).
    resume_from: str | None = None
    if meta.status in UNFINISHED and meta.status != ExecutionStatus.ERROR:
        resume_from = meta.current_node
    elif meta.status == ExecutionStatus.ERROR and not has_new_input:
        resume_from = meta.current_node
    if (
        resume_from is not None
        and resume_from not in (END, START)
        and resume_from in graph.node_objects
        and not skip_unfinished
    ):
        run_span.add_event(EVENT.RESUME, {ATTR.NODE: resume_from})
        replay = meta.status == ExecutionStatus.RUNNING
        skip_before = meta.status == ExecutionStatus.INTERRUPTED_BEFORE
        reply_to_pause = has_new_input and meta.status in (
            ExecutionStatus.INTERRUPTED_BEFORE,
            ExecutionStatus.INTERRUPTED_AFTER,
        )
        if run.hooks is not None and meta.status in _PAUSED + (ExecutionStatus.STOPPED,):
            run.state, resume_value = await _hook_resume(
                run, resume_from, resume_value, has_resume, input_msgs, field_updates
            )
            meta = run.state.execution_meta
        internal = dict(meta.internal_data)
        if has_resume:
            internal["answers"] = _merge_answers(
                internal.get("answers", {}), resume_value, meta.interrupt_data
            )
        accepted: list[Message] = []
        if reply_to_pause:
            run.state, accepted = apply_update(run.state, input_update())
            # Durable with the resumed node's checkpoint, like any run's input.
            run.dirty = True
        run.state = _with_meta(
            run.state,
            status=ExecutionStatus.RUNNING,
            run_id=rc.run_id,
            interrupt_node=None,
            interrupt_reason=None,
            interrupt_data=None,
            error=None,
            internal_data=internal,
        )
        for m in accepted:
            yield _chunk(run, StreamEvent.MESSAGE, message=m)
        if run.hooks is not None:
            await _hook_start(run)
        # A new input follows the finished earlier run: its last write does not end this run.
        run.may_release = not has_new_input or reply_to_pause
        async for ch in _steps(run, resume_from, replay=replay, skip_interrupt_before=skip_before):
            yield ch
        if retry and _earlier_turn(run.state.context, input_msgs) is not None:
            async for ch in _already_processed(run, input_msgs, granularity, streamed=True):
                yield ch
            return
        if reply_to_pause or run.state.execution_meta.status != ExecutionStatus.COMPLETED:
            yield RunResult(
                _result(run, granularity, input_msgs if reply_to_pause else []), run.state
            )
            return

    if not has_new_input:
        # Nothing to do on a finished or unknown thread: no write.
        yield RunResult(_result(run, granularity, []), run.state)
        return

    # 3. The new input. Messages produced by finishing the earlier run come first in the
    # result, as they do in the stored conversation.
    run.resumed_count = len(run.produced)
    run.state, accepted = apply_update(run.state, input_update())
    entry = graph.builder.entry_point
    assert entry is not None
    run.state = _with_meta(
        run.state,
        status=ExecutionStatus.RUNNING,
        current_node=entry,
        run_id=rc.run_id,
        error=None,
        interrupt_node=None,
        interrupt_reason=None,
        interrupt_data=None,
        internal_data={},
    )
    # The input becomes durable with the first node's checkpoint (one write per step); a
    # crash during that node loses nothing the caller was told was stored.
    run.dirty = True
    for m in accepted:
        yield _chunk(run, StreamEvent.MESSAGE, message=m)
    if run.hooks is not None:
        await _hook_start(run)
    run.may_release = True
    async for ch in _steps(run, entry, replay=False, skip_interrupt_before=False):
        yield ch
    yield RunResult(_result(run, granularity, input_msgs), run.state)


async def _load(run: _Run) -> None:
    """The run's first read (again after waiting for the lease): ``run.prev`` and
    ``run.state`` (a new thread's initial state when nothing is stored)."""
    with use_span(run.span):
        run.prev = await run.cp.aload(run.rc.raw, run.graph.state_class)
    run.state = run.prev.state if run.prev is not None else run.graph.new_state()


async def _take_lease(run: _Run, strategy: str) -> None:
    """Take the thread's run lease as ``strategy`` says, reading the thread in the same
    round trip: ``run.lease``, ``run.prev`` and ``run.state`` as :func:`_load` sets them."""
    # A background run's worker took the lease for this attempt's holder id before starting
    # it (tenxgraph.core._recovery): the first read takes it again for the same holder.
    holder = run.rc.raw.get("_lease_holder") or run.rc.run_id
    run.lease = RunLease(run.cp, run.rc.raw, run.key, str(holder))
    run.ctx.lease = run.lease  # ToolNode confirms it before each tool call
    with use_span(run.span):
        run.prev = await run.lease.take(strategy, run.graph.state_class)
    run.state = run.prev.state if run.prev is not None else run.graph.new_state()


#: Text of the result that answers a call a stopped run left unanswered.
STOPPED_CALL_TEXT = (
    "Error: not run: the run that made this call was stopped by a newer run on the thread "
    "(multitask_strategy {strategy!r}) before its tools ran."
)


async def _answer_stopped_calls(run: _Run, strategy: str) -> None:
    """Give every tool call that a run stopped by ``interrupt`` / ``rollback`` left without a
    result (it stopped at the boundary between its model node and its tool node) a tool
    message saying it was not run, in one checkpoint, before the new run's input: the thread
    never holds an assistant tool call without its result, which OpenAI-style APIs refuse.
    The tool node never ran for them, so no side effect is lost; the message ids are derived
    from the call, so the stand-ins are the same whoever writes them."""
    state = run.state
    assert state is not None
    assistant, calls = pending_tool_calls(state.context)
    if assistant is None or not calls:
        return
    text = STOPPED_CALL_TEXT.format(strategy=strategy)
    answers = [
        Message(
            role="tool",
            message_id=str(
                uuid.uuid5(uuid.NAMESPACE_URL, f"stopped:{assistant.message_id}:{c.id}")
            ),
            content=[ToolResultBlock(tool_call_id=c.id, content=text, is_error=True)],
            tool_call_id=c.id,
        )
        for c in calls
    ]
    new_state, _ = apply_update(state, {"context": answers})
    run.may_release = False  # this write does not end the run
    await run.commit(new_state)
    run.may_release = True


def _resumes(graph: CompiledGraph[Any], meta: Any, has_new_input: bool, has_resume: bool) -> bool:
    """Whether this run goes on with the thread's unfinished run (step 2 of ``_run_body``):
    an ``interrupt()`` answer, or a cut-off, stopped, paused or failed run to complete."""
    status = meta.status
    if status == ExecutionStatus.INTERRUPTED:
        node = meta.current_node if has_resume else None
    elif status in UNFINISHED and status != ExecutionStatus.ERROR:
        node = meta.current_node
    elif status == ExecutionStatus.ERROR and not has_new_input:
        node = meta.current_node
    else:
        node = None
    return node is not None and node not in (END, START) and node in graph.node_objects


def _take_in_place_appends(ctx: Any, before: int) -> list[Message]:
    """Take back what a node appended to ``state.context`` in place
    (``state.context.append(m)``): the list is cut back to its length when the node started
    (so the state the node received is again exactly the stored one) and the appended items
    are returned, to go through the ``context`` reducer like returned messages.

    Args:
        ctx: the context list the node received.
        before: its length when the node started.

    Returns:
        The appended items, oldest first (empty when the node appended nothing in place).

    Raises:
        ValidationError: ``VALIDATION_000`` when an appended item is not a ``Message``.
    """
    if len(ctx) <= before:
        return []
    extra = list(ctx[before:])
    del ctx[before:]
    for m in extra:
        if not isinstance(m, Message):
            raise ValidationError(
                f"state.context holds a {type(m).__name__} appended by a node; append Message "
                "objects",
                context={"field": "context"},
            )
    return extra


class _NodeOutcome:
    """What one node execution produced (filled by ``_execute_node``)."""

    __slots__ = ("streamed", "new_state", "new_msgs", "keys", "nxt", "pause", "stopped")

    def __init__(self) -> None:
        self.streamed: set[Any] = set()
        self.new_state: AgentState | None = None
        self.new_msgs: list[Message] = []
        self.keys: set[str] = set()
        self.nxt: str = END
        self.pause: list[dict[str, Any]] | None = None
        self.stopped = False


def _node_span(run: _Run, node: str, state: AgentState, is_replay: bool) -> Any:
    return start_span(
        SPAN.NODE,
        attributes={
            ATTR.NODE: node,
            ATTR.THREAD_ID: run.rc.thread_id,
            ATTR.STEP: state.execution_meta.step,
            ATTR.REPLAYED: is_replay,
        }
        if enabled()
        else None,
    )


class _NodeCall:
    """The fixed parts of one node execution, shared by :func:`_call_node` (a node that
    returns) and :func:`_execute_node` (a generator node)."""

    __slots__ = (
        "ctx0",
        "n0",
        "native",
        "node",
        "obj",
        "span",
        "started",
        "state",
        "step",
        "traced",
    )

    def __init__(self, run: _Run, node: str, state: AgentState, is_replay: bool) -> None:
        self.node = node
        self.state = state
        self.obj = obj = run.graph.node_objects[node]
        self.ctx0 = state.context
        self.n0 = len(self.ctx0)
        self.step = state.execution_meta.step
        # plain ``async def`` node code may run under the cheaper asyncio-native deadline;
        # sync nodes (worker threads) and the runtime's own nodes (Agent, ToolNode: shielded
        # cleanup) keep anyio's cancel scope (see tenxgraph.core._deadline)
        self.native = (
            obj.is_async
            and obj.generator != "sync"
            and not getattr(obj.func, "_tenxgraph_node", False)
        )
        if run.deadline is not None:
            run.deadline.begin()
        self.started = time.perf_counter()
        if run.span is INVALID_SPAN:
            # No tracer provider when the run started: the run records no span, nor do its
            # nodes (no span to make current around the node code either: ``traced``).
            self.span = INVALID_SPAN
            self.traced = False
        else:
            with use_span(run.span):  # the node span is a child of the run span
                self.span = _node_span(run, node, state, is_replay)
            self.traced = True


async def _node_code(run: _Run, nc: _NodeCall, fn: Any, *args: Any) -> Any:
    """``await fn(*args)``: one piece of node code, with the run context variable, the node
    span and the ``node_timeout`` deadline entered around it (and left before anything is
    yielded to the consumer: see :func:`_execute_node`)."""
    token = _RUN.set(run.ctx)
    try:
        deadline = run.deadline
        if not nc.traced:  # no span to make current (a run without a tracer provider)
            if deadline is None:
                return await fn(*args)
            task = deadline.enter() if nc.native else None
            if task is None:
                try:
                    return await deadline.call(fn, *args, native=False)
                except TimeoutError:
                    raise _timed_out(run, nc) from None
            # deadline.call's native path, inline (one coroutine less per node)
            try:
                return await fn(*args)
            except asyncio.CancelledError:
                if deadline.settle(task):
                    raise _timed_out(run, nc) from None
                raise
            finally:
                deadline.settle(task)
        with use_span(run.span), use_span(nc.span):
            if deadline is None:
                return await fn(*args)
            try:
                return await deadline.call(fn, *args, native=nc.native)
            except TimeoutError:
                raise _timed_out(run, nc) from None
    finally:
        _RUN.reset(token)


def _timed_out(run: _Run, nc: _NodeCall) -> NodeTimeoutError:
    """The error of node code that ran past ``node_timeout``."""
    timeout = run.rc.node_timeout
    return NodeTimeoutError(
        f"node {nc.node!r} ran longer than node_timeout={timeout} s",
        context={"node": nc.node, "timeout_s": timeout},
    )


async def _node_done(run: _Run, nc: _NodeCall, returned: list[Any], out: _NodeOutcome) -> None:
    """The node returned (or its generator ended): apply what it produced, route, record."""
    node, state, ctx0 = nc.node, nc.state, nc.ctx0
    appended = _take_in_place_appends(ctx0, nc.n0) if len(ctx0) > nc.n0 else None
    new_msgs: list[Message]
    new_state, new_msgs = state, []
    if appended:
        new_state, new_msgs = apply_update(state, {"context": appended, "__append__": True})
        out.keys.add("context")
    goto = None
    for ret in returned:
        updates, g = node_updates(ret, new_state, node)
        goto = g if g is not None else goto
        for upd in updates:
            if upd.get("__replace__") and upd.get("context") is ctx0:
                # The node returned the state it received (after appending to its
                # context in place): keep the messages taken above.
                upd["context"] = new_state.context
            for k in upd:
                if not k.startswith("__"):
                    out.keys.add(k)
            new_state, more = apply_update(new_state, upd)
            new_msgs.extend(more)
    if nc.traced:
        with use_span(run.span), use_span(nc.span):
            out.nxt = await _route(run.graph, node, new_state, run.rc.raw, goto)
    else:
        out.nxt = await _route(run.graph, node, new_state, run.rc.raw, goto)
    out.new_state, out.new_msgs = new_state, new_msgs
    if run.graph.publisher is not None:
        await _publish(run, Event.NODE_EXECUTION, EventType.END, node, step=nc.step, next=out.nxt)
    node_finished(node, nc.started, None, out.stopped)


async def _node_paused(run: _Run, nc: _NodeCall, exc: BaseException, out: _NodeOutcome) -> bool:
    """When ``exc`` is a pause (``interrupt()``, alone or in a group of them): record it in
    ``out`` and return ``True``; else ``False`` (an error)."""
    payloads = _interrupt_payloads(exc)
    if payloads is None:
        return False
    del nc.ctx0[nc.n0 :]  # the node re-runs on resume: nothing of this attempt is kept
    out.pause = payloads
    await _publish(run, Event.NODE_EXECUTION, EventType.INTERRUPTED, nc.node, step=nc.step)
    node_finished(nc.node, nc.started, None, False)
    return True


async def _node_failed(run: _Run, nc: _NodeCall, exc: BaseException) -> None:
    """The node raised ``exc`` (re-raised by the caller): record it and, for a node failure,
    checkpoint the state before the node with status ``error``."""
    record_error(nc.span, exc)
    if isinstance(exc, Exception):
        node_finished(nc.node, nc.started, exc, False)
        await _publish(
            run,
            Event.NODE_EXECUTION,
            EventType.ERROR,
            nc.node,
            step=nc.step,
            **_error_data(exc),
        )
    if len(nc.ctx0) > nc.n0:
        del nc.ctx0[nc.n0 :]  # the state before the node is what an error checkpoint holds
    if isinstance(exc, Exception) and _should_save_error(exc):
        await _save_error(run, nc.state, nc.node, exc)


async def _call_node(
    run: _Run, node: str, state: AgentState, is_replay: bool, out: _NodeOutcome
) -> None:
    """Run one node that is not a generator, filling ``out`` (a coroutine: nothing to
    stream, so no generator is made)."""
    nc = _NodeCall(run, node, state, is_replay)
    if run.graph.publisher is not None:
        await _publish(run, Event.NODE_EXECUTION, EventType.START, node, step=nc.step)
    try:
        try:
            returned = await _node_code(run, nc, nc.obj, state, run.rc.raw)
            await _node_done(run, nc, [returned], out)
        except (GraphInterrupt, BaseExceptionGroup) as gi:
            if not await _node_paused(run, nc, gi, out):
                raise
    except BaseException as exc:
        await _node_failed(run, nc, exc)
        raise
    finally:
        nc.span.end()


async def _execute_node(
    run: _Run, node: str, state: AgentState, is_replay: bool, out: _NodeOutcome
) -> AsyncGenerator[StreamChunk | None, None]:
    """Run one generator node, filling ``out``; yields the message chunks as the node
    yields them.

    The run context variable, the node span and the ``node_timeout`` deadline are entered
    around each piece of node code and left before anything is yielded to the consumer: the
    consumer may resume this generator from another task or context (sync ``stream()`` does,
    through the portal), where a context variable token or a cancel scope entered here could
    not be left.
    """
    nc = _NodeCall(run, node, state, is_replay)
    meta = {"node": node, "step": nc.step}
    await _publish(run, Event.NODE_EXECUTION, EventType.START, node, step=nc.step)
    try:
        try:
            returned: list[Any] = []
            agen = nc.obj.open_generator(state, run.rc.raw)
            try:
                while True:
                    try:
                        item = await _node_code(run, nc, agen.__anext__)
                    except StopAsyncIteration:
                        break
                    if isinstance(item, StreamChunk):
                        # A tool's progress (StreamEmitter): streamed, never stored.
                        if run.stream:
                            yield item
                        continue
                    for m in item if isinstance(item, list) else [item]:
                        if isinstance(m, (str, Message)):
                            msg = _as_message(m, node)
                            if not msg.delta:
                                returned.append(msg)
                                out.streamed.add(msg.message_id)
                            if run.stream:
                                yield _chunk(run, StreamEvent.MESSAGE, message=msg, metadata=meta)
                        else:
                            returned.append(m)
                    if await run.stop_requested():
                        # Stop between two items: what was yielded so far is the node's
                        # output (as "stop generating" keeps a partial reply).
                        out.stopped = True
                        break
            finally:
                await _node_code(run, nc, agen.aclose)
            await _node_done(run, nc, returned, out)
        except (GraphInterrupt, BaseExceptionGroup) as gi:
            if not await _node_paused(run, nc, gi, out):
                raise
    except BaseException as exc:
        await _node_failed(run, nc, exc)
        raise
    finally:
        nc.span.end()


def _earlier_turn(
    context: list[Message], input_msgs: list[Message]
) -> tuple[list[Message], list[Message]] | None:
    """When every input message is already in ``context`` (by ``message_id``): ``(the stored
    input messages, the answer)``, the answer being the messages that follow the last of them
    up to the next ``user`` message; else ``None``. ``O(k)`` lookups for ``k`` input messages
    on a ``MessageList``, plus the length of the answer."""
    i: int | None
    if isinstance(context, MessageList):
        pos = context.lineage.pos
    else:
        pos = {}
        for i, m in enumerate(context):
            pos.setdefault(m.message_id, i)
    n = len(context)
    found: list[int] = []
    for m in input_msgs:
        i = pos.get(m.message_id)
        if i is None or i >= n or context[i].message_id != m.message_id:
            return None
        found.append(i)
    found.sort()
    answer: list[Message] = []
    for i in range(found[-1] + 1, n):
        m = context[i]
        if m.role == "user":
            break
        answer.append(m)
    return [context[i] for i in found], answer


async def _already_processed(
    run: _Run, input_msgs: list[Message], granularity: ResponseGranularity, streamed: bool = False
) -> AsyncGenerator[StreamChunk | RunResult | None, None]:
    """Answer a retried turn with the earlier run's result, flagged ``already_processed``."""
    assert run.state is not None
    turn = _earlier_turn(run.state.context, input_msgs)
    assert turn is not None
    stored, answer = turn
    run.span.add_event(EVENT.ALREADY_PROCESSED, {ATTR.RUN_ID: run.rc.run_id})
    if not streamed:
        for m in answer:
            yield _chunk(run, StreamEvent.MESSAGE, message=m)
    yield _chunk(
        run,
        StreamEvent.STATE,
        state=run.state,
        data={"status": "already_processed", "already_processed": True},
    )
    run.produced = list(answer)
    run.resumed_count = 0
    out = _result(run, granularity, stored)
    out["already_processed"] = True
    yield RunResult(out, run.state)


async def _steps(
    run: _Run, start: str, *, replay: bool, skip_interrupt_before: bool
) -> AsyncGenerator[StreamChunk | None, None]:
    """Run nodes from ``start`` until END, a pause, a stop or an error."""
    graph = run.graph
    rc = run.rc
    node = start
    first = True
    while node != END:
        state = run.state
        assert state is not None
        # Recursion limit: counted per invocation.
        if run.executed >= rc.recursion_limit:
            run.state = _with_meta(
                state, status=ExecutionStatus.ERROR, current_node=node, error="recursion limit"
            )
            rec_exc = GraphRecursionError(
                f"the run executed {run.executed} nodes, its recursion limit; raise "
                "config['recursion_limit'] or fix the loop. State saved; invoke(None, config) "
                "continues from node " + repr(node),
                context={
                    "thread_id": rc.thread_id,
                    "recursion_limit": rc.recursion_limit,
                    "node": node,
                },
            )
            if run.hooks is not None:
                run.state = await _hook_error(run, rec_exc, run.state, node, persist=True)
            await run.commit(run.state)
            raise rec_exc
        # Stop requested (this process instantly, other processes via the store).
        if run.stop_check_due() and await run.stop_requested():
            await _stop(run, state, node)
            yield _chunk(run, StreamEvent.UPDATES, data={"node": node, "status": "stopped"})
            return
        if node in graph.interrupt_before and not (first and skip_interrupt_before):
            run.state = _with_meta(
                state,
                status=ExecutionStatus.INTERRUPTED_BEFORE,
                current_node=node,
                interrupt_node=node,
                interrupt_reason="interrupt_before",
            )
            if run.hooks is not None:
                run.state = await run.hooks.interrupt(run, node, "before", run.state)
            await run.commit(run.state)
            yield _pause_chunk(run, run.state, node, "before")
            return

        is_replay = replay and first
        run.ctx.node = node
        run.ctx.replayed = is_replay
        meta0 = state.execution_meta
        internal0 = meta0.internal_data
        run.ctx.step = meta0.step
        run.ctx.answers = dict(internal0["answers"]) if "answers" in internal0 else {}
        run.ctx.interrupt_seq = 0
        if is_replay:
            run.ctx.stats["replayed"] = run.ctx.stats.get("replayed", 0) + 1
            if graph._counters is not None:
                graph._counters.add(1, {ATTR.NODE: node})
        first = False
        out = _NodeOutcome()
        if graph.node_objects[node].generator is None:
            await _call_node(run, node, state, is_replay, out)
        else:
            async for ch in _execute_node(run, node, state, is_replay, out):
                yield ch
        if out.pause is not None:
            run.state = _with_meta(
                state,
                status=ExecutionStatus.INTERRUPTED,
                current_node=node,
                interrupt_node=node,
                interrupt_reason=out.pause[0].get("reason") or "interrupt",
                interrupt_data={"interrupts": out.pause},
            )
            if run.hooks is not None:
                run.state = await run.hooks.interrupt(run, node, "interrupt", run.state)
            await run.commit(run.state)
            yield _pause_chunk(run, run.state, node, "interrupt")
            return
        new_state, new_msgs, nxt = out.new_state, out.new_msgs, out.nxt
        assert new_state is not None
        run.executed += 1
        meta_updates: dict[str, Any] = {
            "step": meta0.step + 1,
            "current_node": nxt,
            "status": ExecutionStatus.COMPLETED if nxt == END else ExecutionStatus.RUNNING,
            "internal_data": _carry_internal(internal0) if internal0 else {},
        }
        if out.stopped:
            meta_updates["status"] = ExecutionStatus.STOPPED
        elif node in graph.interrupt_after and nxt != END:
            meta_updates.update(
                status=ExecutionStatus.INTERRUPTED_AFTER,
                interrupt_node=node,
                interrupt_reason="interrupt_after",
            )
        new_state = _with_meta_dict(new_state, meta_updates)
        if run.hooks is not None:
            try:
                new_state = await _hook_after_node(run, node, state, new_state, new_msgs)
            except Exception as exc:
                # as if the node raised: the state before it is saved with status error
                await _save_error(run, state, node, exc)
                raise
        run.state = new_state
        run.produced.extend(new_msgs)
        status = new_state.execution_meta.status
        if rc.durable or status != ExecutionStatus.RUNNING or _has_tool_calls(new_msgs):
            await run.commit(new_state)
        else:
            run.dirty = True
        meta = {"node": node, "step": meta0.step}
        if run.stream:  # ainvoke drops every chunk: none is built
            for m in new_msgs:
                if m.message_id not in out.streamed:
                    yield _chunk(run, StreamEvent.MESSAGE, message=m, metadata=meta)
            yield _chunk(
                run,
                StreamEvent.UPDATES,
                data={"node": node, "next": nxt, "keys": sorted(out.keys)},
                metadata=meta,
            )
            if run.granularity != ResponseGranularity.LOW:
                yield _chunk(run, StreamEvent.STATE, state=run.state, metadata=meta)
        if status == ExecutionStatus.STOPPED:
            await _clear_stop(run)
            yield _chunk(
                run, StreamEvent.UPDATES, data={"node": node, "status": "stopped"}, metadata=meta
            )
            return
        if status == ExecutionStatus.INTERRUPTED_AFTER:
            yield _pause_chunk(run, run.state, node, "after")
            return
        node = nxt
    if run.dirty:
        assert run.state is not None  # a dirty run holds the state it changed
        await run.commit(run.state)


async def _stop(run: _Run, state: AgentState, node: str) -> None:
    """Checkpoint a stop before ``node`` and withdraw the durable stop request."""
    run.state = _with_meta(state, status=ExecutionStatus.STOPPED, current_node=node)
    if run.hooks is not None:
        run.state = await run.hooks.interrupt(run, node, "stop", run.state)
    await run.commit(run.state)
    await _clear_stop(run)


async def _clear_stop(run: _Run) -> None:
    try:
        await run.cp.aset_stop(run.rc.raw, False)
    except TenxGraphError as exc:
        log.warning("could not clear the stop flag: %s", exc.error_code)


def _interrupt_payloads(exc: BaseException) -> list[dict[str, Any]] | None:
    """The stored forms of the interrupts of a ``GraphInterrupt`` or of a group made only of
    them (parallel tools), in id order; ``None`` when ``exc`` holds anything else."""
    if isinstance(exc, GraphInterrupt):
        return [i.to_dict() for i in exc.interrupts]
    if isinstance(exc, BaseExceptionGroup):
        out: list[dict[str, Any]] = []
        for sub in exc.exceptions:
            got = _interrupt_payloads(sub)
            if got is None:
                return None
            out.extend(got)
        return sorted(out, key=lambda p: p.get("id", ""))
    return None


def _merge_answers(
    answers: dict[str, Any], resume_value: Any, interrupt_data: dict[str, Any] | None
) -> dict[str, Any]:
    """Add a ``resume`` value to the answers so far: a dict keyed by pending interrupt ids
    answers those; any other value answers the first pending interrupt."""
    pending = [p["id"] for p in (interrupt_data or {}).get("interrupts", [])]
    out = dict(answers)
    if isinstance(resume_value, dict) and resume_value and set(resume_value) <= set(pending):
        out.update(resume_value)
    elif pending:
        out[pending[0]] = resume_value
    return out


def _should_save_error(exc: Exception) -> bool:
    """Node failures from user code (and timeouts) are checkpointed with status ``error``;
    errors of the tenxgraph family (bad return value, routing, storage, ledger) leave the stored
    thread exactly as it was."""
    return isinstance(exc, NodeTimeoutError) or not isinstance(exc, TenxGraphError)


async def _save_error(run: _Run, state: AgentState, node: str, exc: Exception) -> None:
    """Checkpoint the state before the failed node with status ``error`` (best effort)."""
    code = getattr(exc, "error_code", None) or type(exc).__name__
    run.error_saved = True
    try:
        run.state = _with_meta(
            state, status=ExecutionStatus.ERROR, current_node=node, error=str(code)
        )
        if run.hooks is not None:
            run.state = await _hook_error(run, exc, run.state, node, persist=True)
        await run.commit(run.state)
    except Exception as save_exc:  # noqa: BLE001 - the node's error is what the caller sees
        log.warning(
            "could not checkpoint the error state of node %r: %s", node, type(save_exc).__name__
        )


# -- graph lifecycle hooks (tenxgraph.utils.lifecycle; called only when the graph has some) ----
def _carry_internal(internal: dict[str, Any]) -> dict[str, Any]:
    """What of ``execution_meta.internal_data`` the next step keeps: everything but the
    runtime's own answers to ``interrupt()`` (which belong to the node that asked)."""
    if not internal:
        return {}
    return {k: v for k, v in internal.items() if k != "answers"}


async def _hook_start(run: _Run) -> None:
    """``on_graph_start``, once per invocation, before its first node."""
    assert run.hooks is not None and run.state is not None
    if run.hooks_started:
        return
    run.hooks_started = True
    started = await run.hooks.start(run, run.state)
    if started is not run.state:
        run.state = started
        run.dirty = True


async def _hook_resume(
    run: _Run,
    node: str,
    resume_value: Any,
    has_resume: bool,
    input_msgs: list[Message],
    field_updates: dict[str, Any],
) -> tuple[AgentState, Any]:
    """``on_resume`` for a run continuing a paused thread; returns the state and the
    ``resume`` answer (a hook may change it in ``resume_data``)."""
    assert run.hooks is not None and run.state is not None
    data: dict[str, Any] = {}
    if has_resume:
        data["resume"] = resume_value
    if input_msgs:
        data["messages"] = list(input_msgs)
    if field_updates:
        data["state"] = dict(field_updates)
    state = await run.hooks.resume(run, node, run.state, data)
    if state is not run.state:
        run.dirty = True
    return state, data.get("resume", resume_value)


async def _hook_after_node(
    run: _Run, node: str, old: AgentState, new: AgentState, new_msgs: list[Message]
) -> AgentState:
    """``on_state_update`` after a node, then ``on_graph_end`` or ``on_interrupt`` when the node
    ended or paused the run."""
    assert run.hooks is not None
    new = await run.hooks.state_update(run, node, old, new, old.execution_meta.step)
    status = new.execution_meta.status
    if status == ExecutionStatus.COMPLETED:
        produced = run.produced + list(new_msgs)
        new = await run.hooks.end(run, new, produced, new.execution_meta.step)
    elif status == ExecutionStatus.INTERRUPTED_AFTER:
        new = await run.hooks.interrupt(run, node, "after", new)
    elif status == ExecutionStatus.STOPPED:
        new = await run.hooks.interrupt(run, node, "stop", new)
    return new


async def _hook_error(
    run: _Run, exc: Exception, state: AgentState | None, node: str, *, persist: bool
) -> AgentState:
    """``on_graph_error`` (once per run); with ``persist`` the returned state is the one to
    checkpoint, its ``error`` replaced by the hook's message."""
    assert run.hooks is not None
    run.error_hooked = True
    if state is None:
        state = run.graph.new_state()
    got, message = await run.hooks.error(
        run, exc, state, list(run.produced), state.execution_meta.step, node
    )
    if persist and message is not None:
        got = _with_meta(got, error=message)
    return got
