"""OpenTelemetry spans, events and metrics, captured with the SDK's in-memory exporter and
reader (DESIGN section 6, ``docs/telemetry.md``).

The global tracer and meter providers can be set once per process, so this module installs
them once (or reuses an SDK tracer provider another test module installed) with a
``SimpleSpanProcessor`` feeding one ``InMemorySpanExporter``; each test looks only at the spans
of its own trace (a ``test.outer`` span it opens), so spans of other tests cannot interfere.
Metric assertions compare cumulative sums before and after the action.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tenxgraph.core.exceptions import StaleStateError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message
from tenxgraph.models import ScriptedModel
from tenxgraph.records import ThreadKey
from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tenxgraph.telemetry import ATTR, EVENT, METRIC, METRICS, SPAN, user_digest
from tenxgraph.utils.constants import END

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def _run_ok(code: str) -> None:
    """Run ``code`` in a fresh interpreter (no SDK imported by this test process can leak into
    it) and check that it printed exactly ``ok``."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"


# -- providers (once per process) -----------------------------------------------------------------
_EXPORTER = InMemorySpanExporter()
_READER = InMemoryMetricReader()
_installed = False


def _install() -> None:
    global _installed
    if _installed:
        return
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    if not isinstance(metrics.get_meter_provider(), MeterProvider):
        metrics.set_meter_provider(MeterProvider(metric_readers=[_READER]))
    _installed = True


@pytest.fixture(autouse=True)
def otel() -> Iterator[None]:
    """Providers installed; the exporter emptied before each test."""
    _install()
    _EXPORTER.clear()
    yield
    _EXPORTER.clear()


@pytest.fixture
def reader() -> InMemoryMetricReader:
    """The metric reader, or skip when another module claimed the global meter provider."""
    try:
        _READER.get_metrics_data()
    except Exception:  # noqa: BLE001 - not registered with any provider
        pytest.skip("another test module installed the global meter provider first")
    return _READER


def metric_sums(rd: InMemoryMetricReader) -> dict[tuple[str, tuple[tuple[str, Any], ...]], float]:
    """Cumulative value of every data point: counter sums, histogram counts; keyed by metric
    name and sorted attribute items."""
    out: dict[tuple[str, tuple[tuple[str, Any], ...]], float] = {}
    data = rd.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            if sm.scope.name != "tenxgraph":
                continue
            for m in sm.metrics:
                for dp in m.data.data_points:
                    value = getattr(dp, "value", None)
                    if value is None:
                        value = dp.count
                    key = (m.name, tuple(sorted((dp.attributes or {}).items())))
                    out[key] = out.get(key, 0) + value
    return out


def delta(before: dict, after: dict) -> dict:
    """Non-zero differences of two :func:`metric_sums` snapshots."""
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


# -- backends ----------------------------------------------------------------------------------
@dataclass
class Backend:
    """One storage configuration; :meth:`new` gives a checkpointer over the same data."""

    kind: str
    tmp: Path
    dsn: str = ""
    schema: str = ""
    redis_url: str = ""
    redis_prefix: str = ""
    made: list[BaseCheckpointer] = field(default_factory=list)

    @property
    def source(self) -> str:
        return {"memory": "memory", "sqlite": "sqlite"}.get(self.kind, "postgresql")

    @property
    def caches(self) -> list[str]:
        return ["lru", "redis"] if self.kind == "postgres+redis" else ["lru"]

    def new(self) -> BaseCheckpointer:
        from tenxgraph.storage.checkpointer import (
            InMemoryCheckpointer,
            PgCheckpointer,
            SqliteCheckpointer,
        )

        if self.kind == "memory":
            if self.made:
                return self.made[0]
            cp: BaseCheckpointer = InMemoryCheckpointer()
        elif self.kind == "sqlite":
            cp = SqliteCheckpointer(self.tmp / "telemetry.sqlite")
        elif self.kind == "postgres":
            cp = PgCheckpointer(postgres_dsn=self.dsn, schema=self.schema)
        else:
            cp = PgCheckpointer(
                postgres_dsn=self.dsn,
                schema=self.schema,
                redis_url=self.redis_url,
                redis_prefix=self.redis_prefix,
            )
        self.made.append(cp)
        return cp


BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param(
        "postgres+redis", id="postgres+redis", marks=[pytest.mark.postgres, pytest.mark.redis]
    ),
]


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    b = Backend(request.param, tmp_path)
    if b.kind.startswith("postgres"):
        b.dsn = request.getfixturevalue("pg_dsn")
        b.schema = request.getfixturevalue("pg_schema")
    if b.kind == "postgres+redis":
        b.redis_url = request.getfixturevalue("redis_url")
        b.redis_prefix = request.getfixturevalue("redis_prefix")
    try:
        yield b
    finally:
        for cp in reversed(b.made):
            await cp.aclose()


# -- span helpers --------------------------------------------------------------------------------
_test_tracer = trace.get_tracer("tenxgraph-tests")


def spans_of(outer: Any) -> list[ReadableSpan]:
    """Finished spans of ``outer``'s trace, outer excluded, in start order."""
    tid = outer.get_span_context().trace_id
    found = [
        s
        for s in _EXPORTER.get_finished_spans()
        if s.context.trace_id == tid and s.context.span_id != outer.get_span_context().span_id
    ]
    return sorted(found, key=lambda s: s.start_time or 0)


def label(s: ReadableSpan) -> str:
    a = s.attributes or {}
    if s.name == SPAN.NODE:
        return f"{s.name}[{a.get(ATTR.NODE)}]"
    if ATTR.TIER in a and s.name != SPAN.SETUP:
        return f"{s.name}[{a[ATTR.TIER]}]"
    return s.name


def tree(spans: list[ReadableSpan], root_id: int) -> list[str]:
    """Indented labels, depth first, children in start order, below span ``root_id``."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in spans:
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)
    out: list[str] = []

    def walk(parent: int, depth: int) -> None:
        for s in children.get(parent, []):
            out.append("  " * depth + label(s))
            walk(s.context.span_id, depth + 1)

    walk(root_id, 0)
    return out


def only(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


# -- graphs ----------------------------------------------------------------------------------
def three_nodes(cp: BaseCheckpointer) -> Any:
    graph = StateGraph()
    graph.add_node("a", lambda state: "from a")
    graph.add_node("b", lambda state: "from b")
    graph.add_node("c", lambda state: "from c")
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", END)
    graph.set_entry_point("a")
    return graph.compile(checkpointer=cp)


def route(state: AgentState) -> str:
    last = state.context[-1]
    if last.role == "assistant" and last.tool_calls():
        return "TOOL"
    return END


def agent_graph(model: Any, tools: list[Any], cp: BaseCheckpointer) -> Any:
    graph = StateGraph(AgentState)
    graph.add_node("MAIN", Agent(model=model, tool_node="TOOL"))
    graph.add_node("TOOL", ToolNode(tools))
    graph.add_conditional_edges("MAIN", route, {"TOOL": "TOOL", END: END})
    graph.add_edge("TOOL", "MAIN")
    graph.set_entry_point("MAIN")
    return graph.compile(checkpointer=cp)


def tool_model(calls: list[tuple[str, dict[str, Any]]], final: str) -> ScriptedModel:
    """Calls the tools (fresh ids) until a tool result is the last message, then ``final``."""

    def answer(messages: list[Message], tools: Any) -> Any:
        if messages[-1].role == "tool":
            return {"content": final}
        return {
            "content": "",
            "tool_calls": [
                {"id": f"call_{uuid.uuid4().hex[:8]}", "name": n, "arguments": a} for n, a in calls
            ],
        }

    return ScriptedModel.from_fn(answer)


def expected_tree(b: Backend, nodes: list[str]) -> list[str]:
    """The span tree of a run on a fresh thread with a checkpoint after each node."""
    reads = [f"  {SPAN.CHECKPOINT_READ}[{t}]" for t in [*b.caches, b.source]]
    # Redis is written in the background, outside the run's trace: never inside a step.
    private = [t for t in b.caches if t != "redis"]
    writes = [f"    {SPAN.CHECKPOINT_WRITE}[{t}]" for t in [b.source, *private]]
    out = [SPAN.RUN, f"  {SPAN.CHECKPOINT_LOAD}", *["  " + r for r in reads]]
    for n in nodes:
        out += [f"  {SPAN.NODE}[{n}]", f"  {SPAN.CHECKPOINT_COMMIT}", *writes]
    return out


# -- the span tree ---------------------------------------------------------------------------------
async def test_span_tree_of_a_three_node_run(backend: Backend, reader: Any) -> None:
    cp = backend.new()
    await cp.asetup()
    app = three_nodes(cp)
    before = metric_sums(reader)
    with _test_tracer.start_as_current_span("test.outer") as outer:
        await app.ainvoke({"messages": ["hi"]}, {"thread_id": "t-tree", "user_id": "u-1"})
    spans = spans_of(outer)
    assert tree(spans, outer.get_span_context().span_id) == expected_tree(backend, ["a", "b", "c"])

    [run] = only(spans, SPAN.RUN)
    assert run.parent is not None and run.parent.span_id == outer.get_span_context().span_id
    assert run.attributes[ATTR.THREAD_ID] == "t-tree"
    assert run.attributes[ATTR.USER_DIGEST] == user_digest("u-1")
    assert run.attributes[ATTR.RUN_ID]
    nodes = only(spans, SPAN.NODE)
    assert [(s.attributes[ATTR.STEP], s.attributes[ATTR.REPLAYED]) for s in nodes] == [
        (0, False),
        (1, False),
        (2, False),
    ]
    assert all(s.status.status_code == StatusCode.UNSET for s in spans)

    # Every tier span: its kind, the database conventions for the source (and Redis) tiers.
    for s in only(spans, SPAN.CHECKPOINT_READ) + only(spans, SPAN.CHECKPOINT_WRITE):
        a = s.attributes
        tier = a[ATTR.TIER]
        assert a[ATTR.THREAD_ID] == "t-tree"
        if tier in ("memory", "lru"):
            assert s.kind == SpanKind.INTERNAL
            assert ATTR.DB_SYSTEM not in a
            continue
        assert s.kind == SpanKind.CLIENT
        assert a[ATTR.DB_SYSTEM] == {"postgresql": "postgresql", "sqlite": "sqlite"}.get(
            tier, "redis"
        )
        assert a[ATTR.DB_OPERATION]
        if tier in ("postgresql", "sqlite"):
            assert a[ATTR.DB_NAMESPACE]
        if tier in ("postgresql", "redis"):
            assert a[ATTR.SERVER_ADDRESS] and isinstance(a[ATTR.SERVER_PORT], int)
    # Reads on a fresh thread miss in every tier.
    assert [s.attributes[ATTR.HIT] for s in only(spans, SPAN.CHECKPOINT_READ)] == [False] * (
        len(backend.caches) + 1
    )
    # Writes: version 1, 2, 3 in every tier; bytes and rows on the source's and the commit.
    source_writes = [
        s for s in only(spans, SPAN.CHECKPOINT_WRITE) if s.attributes[ATTR.TIER] == backend.source
    ]
    for spans_ in (source_writes, only(spans, SPAN.CHECKPOINT_COMMIT)):
        assert [s.attributes[ATTR.VERSION] for s in spans_] == [1, 2, 3]
        assert all(s.attributes[ATTR.BYTES] > 0 for s in spans_)
        assert [s.attributes[ATTR.MESSAGES_WRITTEN] for s in spans_] == [2, 1, 1]
    for tier in [t for t in backend.caches if t != "redis"]:  # Redis: in the background
        cache_writes = [
            s for s in only(spans, SPAN.CHECKPOINT_WRITE) if s.attributes[ATTR.TIER] == tier
        ]
        assert [s.attributes[ATTR.VERSION] for s in cache_writes] == [1, 2, 3]

    d = delta(before, metric_sums(reader))
    tier_attr = ((ATTR.TIER, backend.source),)
    assert d[(METRIC.CHECKPOINTS, tier_attr)] == 3
    assert d[(METRIC.WRITE_DURATION, tier_attr)] == 3  # histogram count
    for tier in backend.caches:
        assert d[(METRIC.CACHE_MISSES, ((ATTR.TIER, tier),))] == 1


async def test_run_span_is_not_current_between_chunks() -> None:
    """The run span is current only around each piece of work: the consumer of ``astream``
    sees its own span between chunks, and a span it opens there is not a child of the run."""
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer

    app = three_nodes(InMemoryCheckpointer())
    with _test_tracer.start_as_current_span("test.outer") as outer:
        async for _chunk in app.astream({"messages": ["hi"]}, {"thread_id": "t-stream"}):
            assert trace.get_current_span() is outer
            with _test_tracer.start_as_current_span("test.consumer"):
                pass
    spans = spans_of(outer)
    [run] = only(spans, SPAN.RUN)
    consumer = only(spans, "test.consumer")
    assert consumer and all(s.parent.span_id == outer.get_span_context().span_id for s in consumer)
    assert len(only(spans, SPAN.NODE)) == 3
    assert all(s.parent.span_id == run.context.span_id for s in only(spans, SPAN.NODE))


# -- conflict --------------------------------------------------------------------------------------
async def test_conflict_event_on_the_losing_write(backend: Backend, reader: Any) -> None:
    """Node ``b`` writes the thread behind the run's back (as another instance would): the
    run's checkpoint after ``b`` loses the compare-and-swap against version 2."""
    cp = backend.new()
    await cp.asetup()
    config = {"thread_id": "t-conflict", "user_id": "u-1"}

    async def sneaky(state: AgentState) -> str:
        await cp.aput_state({"thread_id": "t-conflict", "user_id": "u-1"}, state)
        return "from b"

    graph = StateGraph()
    graph.add_node("a", lambda state: "from a")
    graph.add_node("b", sneaky)
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    graph.set_entry_point("a")
    app = graph.compile(checkpointer=cp)
    before = metric_sums(reader)
    with _test_tracer.start_as_current_span("test.outer") as outer:
        with pytest.raises(StaleStateError) as err:
            await app.ainvoke({"messages": ["hi"]}, config)
    assert (err.value.context["expected_version"], err.value.context["current_version"]) == (1, 2)
    spans = spans_of(outer)

    [lost] = [
        s for s in only(spans, SPAN.CHECKPOINT_WRITE) if s.status.status_code == StatusCode.ERROR
    ]
    assert lost.attributes[ATTR.TIER] == backend.source
    [event] = [e for e in lost.events if e.name == EVENT.CONFLICT]
    assert dict(event.attributes) == {
        ATTR.THREAD_ID: "t-conflict",
        ATTR.EXPECTED_VERSION: 1,
        ATTR.CURRENT_VERSION: 2,
    }
    for s in (lost, only(spans, SPAN.CHECKPOINT_COMMIT)[-1], only(spans, SPAN.RUN)[0]):
        assert s.status.status_code == StatusCode.ERROR
        assert s.attributes[ATTR.ERROR_TYPE] == "STORAGE_CONFLICT_000"
        assert s.attributes[ATTR.ERROR_CODE] == "STORAGE_CONFLICT_000"
    # The event is on the span whose CAS lost, nowhere else; the nodes did not fail.
    assert [s for s in spans if any(e.name == EVENT.CONFLICT for e in s.events)] == [lost]
    assert all(s.status.status_code == StatusCode.UNSET for s in only(spans, SPAN.NODE))
    if backend.caches:
        commit = only(spans, SPAN.CHECKPOINT_COMMIT)[-1]
        assert EVENT.CACHE_INVALIDATED in [e.name for e in commit.events]
    d = delta(before, metric_sums(reader))
    assert d[(METRIC.CONFLICTS, ((ATTR.TIER, backend.source),))] == 1
    failed = (
        METRIC.WRITE_DURATION,
        tuple(sorted({ATTR.TIER: backend.source, ATTR.ERROR_TYPE: "STORAGE_CONFLICT_000"}.items())),
    )
    assert d[failed] == 1


# -- ledger hit on replay -----------------------------------------------------------------------
async def test_ledger_hit_event_on_replay(backend: Backend, reader: Any) -> None:
    """The tool ran and was recorded, then the checkpoint after the tool node was lost: the
    replayed node answers from the ledger, with a ``tenxgraph.ledger.hit`` event."""
    ran: list[int] = []

    def charge(amount: int) -> str:
        """Charge the card."""
        ran.append(amount)
        return f"charged {amount}"

    cp = backend.new()
    await cp.asetup()
    original = cp.acommit
    failed = {"done": False}

    async def acommit(config: dict, state: AgentState, prev: Any, **lease: Any) -> Any:
        if not failed["done"] and state.context and state.context[-1].role == "tool":
            failed["done"] = True
            raise RuntimeError("killed before the checkpoint")
        return await original(config, state, prev, **lease)

    cp.acommit = acommit  # type: ignore[method-assign]
    model = tool_model([("charge", {"amount": 5})], final="done")
    config = {"thread_id": "t-ledger", "user_id": "u-1"}
    with pytest.raises(RuntimeError):
        await agent_graph(model, [charge], cp).ainvoke({"messages": ["pay"]}, dict(config))
    del cp.acommit  # back to the class's method
    stored = await cp.aget_state(config)
    [call] = stored.context[-1].tool_calls()

    before = metric_sums(reader)
    with _test_tracer.start_as_current_span("test.outer") as outer:
        await agent_graph(model, [charge], backend.new()).ainvoke(None, dict(config))
    assert ran == [5]
    spans = spans_of(outer)
    [run] = only(spans, SPAN.RUN)
    assert [(e.name, dict(e.attributes)) for e in run.events] == [
        (EVENT.RESUME, {ATTR.NODE: "TOOL"})
    ]
    replayed = [s for s in only(spans, SPAN.NODE) if s.attributes[ATTR.REPLAYED]]
    assert [s.attributes[ATTR.NODE] for s in replayed] == ["TOOL"]
    [tool_span] = only(spans, SPAN.TOOL)
    assert tool_span.parent.span_id == replayed[0].context.span_id
    assert [(e.name, dict(e.attributes)) for e in tool_span.events] == [
        (EVENT.LEDGER_HIT, {ATTR.TOOL_NAME: "charge", ATTR.TOOL_CALL_ID: call.id})
    ]
    reads = only(spans, SPAN.LEDGER_READ)
    assert reads and all(s.parent.span_id == tool_span.context.span_id for s in reads)
    assert not only(spans, SPAN.LEDGER_WRITE)  # nothing recorded again
    d = delta(before, metric_sums(reader))
    assert d[(METRIC.LEDGER_HITS, ((ATTR.TOOL_NAME, "charge"),))] == 1
    assert d[(METRIC.REPLAYED_NODES, ((ATTR.NODE, "TOOL"),))] == 1


# -- cache hits and misses -------------------------------------------------------------------------
async def test_cache_hit_and_miss_attributes_per_tier(backend: Backend, reader: Any) -> None:
    cp = backend.new()
    await cp.asetup()
    app = three_nodes(cp)
    config = {"thread_id": "t-cache", "user_id": "u-1"}
    lru = cp.store.caches[0]

    async def reads(action: Any) -> list[tuple[str, bool]]:
        with _test_tracer.start_as_current_span("test.outer") as outer:
            await action()
        [load] = only(spans_of(outer), SPAN.CHECKPOINT_LOAD)[:1]
        return [
            (s.attributes[ATTR.TIER], s.attributes[ATTR.HIT])
            for s in only(spans_of(outer), SPAN.CHECKPOINT_READ)
            if s.parent.span_id == load.context.span_id
        ]

    def run() -> Any:
        return app.ainvoke({"messages": ["hi"]}, dict(config))

    before = metric_sums(reader)
    misses = [(t, False) for t in [*backend.caches, backend.source]]
    assert await reads(run) == misses  # fresh thread
    # warm LRU, confirmed by the source in the same one round trip (read_since); the memory
    # store's LRU cannot go stale (its source is private to the checkpointer): not confirmed
    confirm = [] if backend.kind == "memory" else [(backend.source, True)]
    assert await reads(run) == [("lru", True), *confirm]

    await lru.aclose()  # this process's LRU forgets the thread
    if backend.kind == "postgres+redis":
        assert await reads(run) == [("lru", False), ("redis", True), ("postgresql", True)]
        redis = cp.store.caches[1]
        await cp.store.aflush()
        await lru.aclose()
        await redis.invalidate(ThreadKey("t-cache", "u-1"))
        assert await reads(run) == [("lru", False), ("redis", False), ("postgresql", True)]
    else:
        assert await reads(run) == [("lru", False), (backend.source, True)]

    d = delta(before, metric_sums(reader))
    lru_attr = ((ATTR.TIER, "lru"),)
    if backend.kind == "postgres+redis":
        assert (d[(METRIC.CACHE_HITS, lru_attr)], d[(METRIC.CACHE_MISSES, lru_attr)]) == (1, 3)
        redis_attr = ((ATTR.TIER, "redis"),)
        assert (d[(METRIC.CACHE_HITS, redis_attr)], d[(METRIC.CACHE_MISSES, redis_attr)]) == (1, 2)
    else:
        assert (d[(METRIC.CACHE_HITS, lru_attr)], d[(METRIC.CACHE_MISSES, lru_attr)]) == (1, 2)


async def test_lru_hit_is_validated_under_the_load_span(backend: Backend) -> None:
    """A warm LRU hit is confirmed by the source's conditional read, never by Redis (the
    in-memory store's private source cannot make its LRU stale: no confirmation there)."""
    cp = backend.new()
    await cp.asetup()
    app = three_nodes(cp)
    config = {"thread_id": "t-validate", "user_id": "u-1"}
    await app.ainvoke({"messages": ["hi"]}, dict(config))
    with _test_tracer.start_as_current_span("test.outer") as outer:
        await app.ainvoke({"messages": ["again"]}, dict(config))
    spans = spans_of(outer)
    load_tree = tree(spans, only(spans, SPAN.CHECKPOINT_LOAD)[0].context.span_id)
    check = [] if backend.kind == "memory" else [f"{SPAN.CHECKPOINT_READ}[{backend.source}]"]
    assert load_tree == [f"{SPAN.CHECKPOINT_READ}[lru]", *check]


async def test_cache_tier_failure_is_an_event_not_an_error() -> None:
    """A cache tier that raises is a miss: a ``tenxgraph.cache.failure`` event on the load
    span, the read goes on to the source, nothing is ERROR."""
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer

    cp = InMemoryCheckpointer()
    app = three_nodes(cp)

    async def broken_get(key: Any) -> Any:
        raise ConnectionError("cache down")

    cp.store.caches[0].get = broken_get  # type: ignore[method-assign]
    with _test_tracer.start_as_current_span("test.outer") as outer:
        await app.ainvoke({"messages": ["hi"]}, {"thread_id": "t-cache-down"})
    spans = spans_of(outer)
    [load] = only(spans, SPAN.CHECKPOINT_LOAD)
    assert [(e.name, dict(e.attributes)) for e in load.events] == [
        (EVENT.CACHE_FAILURE, {ATTR.TIER: "lru", ATTR.ERROR_TYPE: "ConnectionError"})
    ]
    assert [label(s) for s in only(spans, SPAN.CHECKPOINT_READ)] == [
        f"{SPAN.CHECKPOINT_READ}[memory]"
    ]
    assert all(s.status.status_code == StatusCode.UNSET for s in spans)


# -- errors ---------------------------------------------------------------------------------------
async def test_error_status_only_where_the_error_escapes() -> None:
    """A node that raises: its span and the run's are ERROR (type only, no message, no
    exception event); a tool that raises answers the model, so its span stays UNSET with a
    ``tenxgraph.tool.failed`` event."""
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer

    def broken(state: AgentState) -> str:
        raise ValueError("node exploded with private details")

    graph = StateGraph()
    graph.add_node("a", broken)
    graph.add_edge("a", END)
    graph.set_entry_point("a")
    with _test_tracer.start_as_current_span("test.outer") as outer:
        with pytest.raises(ValueError):
            await graph.compile(checkpointer=InMemoryCheckpointer()).ainvoke(
                {"messages": ["hi"]}, {"thread_id": "t-err"}
            )
    spans = spans_of(outer)
    for s in only(spans, SPAN.NODE) + only(spans, SPAN.RUN):
        assert s.status.status_code == StatusCode.ERROR
        assert s.status.description == "ValueError"
        assert s.attributes[ATTR.ERROR_TYPE] == "ValueError"
        assert ATTR.ERROR_CODE not in s.attributes
    assert not [e for s in spans for e in s.events if e.name == "exception"]
    # the error checkpoint write succeeded: no error on it
    assert all(
        s.status.status_code == StatusCode.UNSET
        for s in only(spans, SPAN.CHECKPOINT_COMMIT) + only(spans, SPAN.CHECKPOINT_WRITE)
    )

    def flaky(x: int) -> str:
        """Fails."""
        raise RuntimeError("tool exploded")

    _EXPORTER.clear()
    app = agent_graph(tool_model([("flaky", {"x": 1})], "ok"), [flaky], InMemoryCheckpointer())
    with _test_tracer.start_as_current_span("test.outer") as outer:
        await app.ainvoke({"messages": ["go"]}, {"thread_id": "t-tool-err"})
    spans = spans_of(outer)
    [tool_span] = only(spans, SPAN.TOOL)
    assert tool_span.status.status_code == StatusCode.UNSET
    assert [(e.name, e.attributes[ATTR.ERROR_TYPE]) for e in tool_span.events] == [
        (EVENT.TOOL_FAILED, "RuntimeError")
    ]
    assert all(s.status.status_code == StatusCode.UNSET for s in spans)


# -- privacy ----------------------------------------------------------------------------------------
MARK = "SECRET-MARKER-7f3a"
USER_MARK = "USER-MARKER-91c2"


def _strings(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _strings(v)]
    return [str(value)]


def exported_text(spans: list[ReadableSpan], rd: InMemoryMetricReader | None) -> str:
    """Every name, attribute key and value, event, status and metric data point attribute."""
    parts: list[str] = []
    for s in spans:
        parts += [s.name, str(s.status.description or "")]
        for k, v in (s.attributes or {}).items():
            parts += [k, *_strings(v)]
        for e in s.events:
            parts.append(e.name)
            for k, v in (e.attributes or {}).items():
                parts += [k, *_strings(v)]
        for link in s.links:
            parts += [str(v) for v in (link.attributes or {}).values()]
    if rd is not None:
        data = rd.get_metrics_data()
        parts.append(data.to_json() if data is not None else "")
    return "\n".join(parts)


async def test_no_message_text_tool_data_or_user_id_in_telemetry(
    backend: Backend, reader: Any
) -> None:
    def lookup(query: str) -> str:
        """Look something up."""
        return f"result for {query}: {MARK}"

    def failing(query: str) -> str:
        """Fails, quoting its input."""
        raise RuntimeError(f"cannot handle {query}")

    cp = backend.new()
    await cp.asetup()
    model = tool_model(
        [("lookup", {"query": f"find {MARK}"}), ("failing", {"query": MARK})],
        final=f"here you go: {MARK}",
    )
    app = agent_graph(model, [lookup, failing], cp)
    config = {"thread_id": "t-private", "user_id": USER_MARK}
    with _test_tracer.start_as_current_span("test.outer") as outer:
        out = await app.ainvoke({"messages": [f"please {MARK}"]}, dict(config))
        assert MARK in out["messages"][-1].text()
        await app.ainvoke({"messages": [f"more {MARK}"]}, dict(config))  # warm reads too
        await cp.aget_state_history(dict(config))
        await cp.aput_state(dict(config), (await cp.aget_state(dict(config))))
    spans = spans_of(outer)
    assert len(spans) > 20
    assert only(spans, SPAN.TOOL) and only(spans, SPAN.AGENT)
    text = exported_text(spans, reader)
    assert MARK not in text
    assert USER_MARK not in text
    assert user_digest(USER_MARK) in text
    # everything on the wire is there, just not the contents
    assert MARK in json.dumps([m.model_dump(mode="json") for m in out["messages"]])


# -- the reference page and the no-SDK path ---------------------------------------------------------
def test_every_name_is_documented() -> None:
    """docs/telemetry.md lists every span, attribute, event and metric the code defines."""
    page = (ROOT / "docs" / "telemetry.md").read_text(encoding="utf-8")
    for cls in (SPAN, ATTR, EVENT, METRIC):
        for const, value in vars(cls).items():
            if not const.startswith("_"):
                assert f"`{value}`" in page, f"{cls.__name__}.{const} = {value!r} is not documented"
    for name, spec in METRICS.items():
        assert f"`{spec.unit}`" in page, f"unit of {name}"


def test_without_an_sdk_nothing_is_recorded_and_spans_are_shared_noops() -> None:
    """In a fresh interpreter with no provider: ``enabled()`` is false, ``span`` returns one
    shared no-op context manager, and a graph runs."""
    code = """
import asyncio
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN
import tenxgraph.telemetry as t
from tenxgraph.core.graph import StateGraph
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END
assert not t.enabled()
assert t.span(t.SPAN.NODE) is t.span(t.SPAN.RUN)
with t.span(t.SPAN.NODE) as sp:
    assert sp is INVALID_SPAN and not sp.is_recording()
assert t.start_span(t.SPAN.RUN) is INVALID_SPAN
defined = t.tracer
t.tracer = lambda: trace.NoOpTracer()  # a replaced tracer counts as enabled
assert t.enabled()
t.tracer = defined
assert not t.enabled()
g = StateGraph()
g.add_node("a", lambda state: "x")
g.add_edge("a", END)
g.set_entry_point("a")
out = asyncio.run(g.compile(checkpointer=InMemoryCheckpointer()).ainvoke({"messages": ["hi"]}, {"thread_id": "t"}))
assert out["messages"][-1].text() == "x"
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
trace.set_tracer_provider(TracerProvider())
assert t.enabled() and t.span(t.SPAN.NODE) is not t.span(t.SPAN.NODE)
print("ok")
"""
    _run_ok(code)


def test_a_run_started_without_an_sdk_records_no_node_span_even_if_one_appears() -> None:
    """Whether a run is traced is decided when it starts: its run span and its node spans are
    all recorded or none. A provider installed by a node mid-run records the spans of the next
    run (node spans of the first would be orphans: their run span does not exist)."""
    code = """
import asyncio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import tenxgraph.telemetry as t
from tenxgraph.core.graph import StateGraph
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END
exporter = InMemorySpanExporter()

def install(state):
    if not t.enabled():
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    return "x"

g = StateGraph()
g.add_node("a", install)
g.add_node("b", lambda state: "y")
g.add_edge("a", "b")
g.add_edge("b", END)
g.set_entry_point("a")
app = g.compile(checkpointer=InMemoryCheckpointer())
asyncio.run(app.ainvoke({"messages": ["hi"]}, {"thread_id": "t1"}))
names = [s.name for s in exporter.get_finished_spans()]
assert t.SPAN.RUN not in names and t.SPAN.NODE not in names, names
asyncio.run(app.ainvoke({"messages": ["hi"]}, {"thread_id": "t2"}))
names = [s.name for s in exporter.get_finished_spans()]
assert names.count(t.SPAN.RUN) == 1 and names.count(t.SPAN.NODE) == 2, names
print("ok")
"""
    _run_ok(code)


def test_sync_invoke_parents_the_run_to_the_callers_span() -> None:
    """The sync twin runs on tenxgraph's portal thread; the caller's span is still the parent."""
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer

    _install()
    app = three_nodes(InMemoryCheckpointer())
    with _test_tracer.start_as_current_span("test.outer") as outer:
        app.invoke({"messages": ["hi"]}, {"thread_id": "t-sync"})
    [run] = only(spans_of(outer), SPAN.RUN)
    assert run.parent is not None and run.parent.span_id == outer.get_span_context().span_id


# -- ledger read fallbacks -------------------------------------------------------------------------
async def test_ledger_read_fallback_is_counted(backend: Backend, reader: Any) -> None:
    """A ledger read that keeps failing (past its retries, bounded by the tool's timeout) runs
    the tool and counts one ``tenxgraph.ledger.read_fallbacks`` data point."""
    ran: list[int] = []

    def ping() -> str:
        ran.append(1)
        return "pong"

    cp = backend.new()

    async def broken_get(config: dict, call_key: str) -> Any:
        raise RuntimeError("unreachable")

    cp.aledger_get = broken_get  # type: ignore[method-assign]
    model = tool_model([("ping", {})], final="done")
    before = metric_sums(reader)
    await agent_graph(model, [ping], cp).ainvoke(
        {"messages": ["go"]}, {"thread_id": "t-fallback", "tool_timeout": 0.2}
    )
    assert ran == [1]
    d = delta(before, metric_sums(reader))
    key = (
        METRIC.LEDGER_READ_FALLBACKS,
        ((ATTR.ERROR_TYPE, "RuntimeError"), (ATTR.TOOL_NAME, "ping")),
    )
    assert d[key] == 1


def test_streamed_agent_span_under_sync_stream(caplog: pytest.LogCaptureFixture) -> None:
    """The agent span lives across the yields of a streamed model call; sync ``stream()``
    resumes the node from the portal's task, and no context token is left behind."""
    import importlib.util
    import logging
    import sys

    from tenxgraph.core.graph import Agent

    path = ROOT / "tests" / "agent" / "_fake_llm_server.py"
    spec = importlib.util.spec_from_file_location("_spans_fake_llm_server", path)
    assert spec is not None and spec.loader is not None
    fake = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fake
    spec.loader.exec_module(fake)
    with fake.ScriptedLLMServer() as llm:
        llm.add(fake.text("one two three four"))
        g = StateGraph()
        g.add_node("MAIN", Agent(model="gpt-4o", base_url=llm.base_url))
        g.set_entry_point("MAIN")
        g.add_edge("MAIN", END)
        app = g.compile()
        with caplog.at_level(logging.ERROR):
            chunks = list(app.stream({"messages": ["hi"]}, {"thread_id": "span-stream"}))
        app.close()
    assert sum(1 for c in chunks if c.event == "message" and c.message.delta) == 4
    assert "Failed to detach context" not in caplog.text
    spans = _EXPORTER.get_finished_spans()
    agent = [s for s in spans if s.name == SPAN.AGENT]
    node = [s for s in spans if s.name == SPAN.NODE]
    assert len(agent) == 1 and agent[0].parent is not None
    assert agent[0].parent.span_id in {n.context.span_id for n in node}
