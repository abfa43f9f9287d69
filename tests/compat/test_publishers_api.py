"""Publishers as 10xGraph's publishers reference describes them, for the part tenxgraph
provides: ``compile(publisher=...)`` receives an ``EventModel`` for the start and end of each
run and node (errors and pauses included), a failing publisher never breaks a run, and
``OtelPublisher`` turns the events into spans (memory, SQLite, Postgres)."""

from __future__ import annotations

from typing import Any

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    only,
    pytest_generate_tests,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph import StateGraph
from tenxgraph.runtime.publisher import (
    BasePublisher,
    ObservabilityLevel,
    OtelPublisher,
    setup_tracing,
)
from tenxgraph.runtime.publisher.events import ContentType, Event, EventModel, EventType
from tenxgraph.utils import END, interrupt


class Recorder(BasePublisher):
    """A publisher written as the reference's custom-publisher section shows."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__({"kind": "recorder"})
        self.events: list[EventModel] = []
        self.fail = fail

    async def publish(self, event: EventModel) -> None:
        if self._is_closed:
            raise RuntimeError("closed")
        if self.fail:
            raise ConnectionError("bus down")
        self.events.append(event)

    async def close(self) -> None:
        self._is_closed = True

    def sync_close(self) -> None:
        self._is_closed = True

    def trail(self) -> list[tuple[str, str, str | None]]:
        return [(e.event.value, e.event_type.value, e.node_name) for e in self.events]


def two_nodes(fail_in_b: bool = False, ask_in_b: bool = False) -> StateGraph:
    def a(state):  # noqa: ANN001, ANN202
        return "from a"

    def b(state):  # noqa: ANN001, ANN202
        if fail_in_b:
            raise ValueError("b broke")
        if ask_in_b:
            return f"answer: {interrupt('approve?')}"
        return "from b"

    g = StateGraph()
    g.add_node("a", a)
    g.add_node("b", b)
    g.set_entry_point("a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g


@pytest.mark.anyio
async def test_a_run_publishes_its_lifecycle(backend: Backend) -> None:
    pub = Recorder()
    app = two_nodes().compile(checkpointer=backend.new(), publisher=pub)
    cfg = {"thread_id": "p1"}
    await app.ainvoke({"messages": ["go"]}, cfg)
    assert pub.trail() == [
        ("graph_execution", "start", None),
        ("node_execution", "start", "a"),
        ("node_execution", "end", "a"),
        ("node_execution", "start", "b"),
        ("node_execution", "end", "b"),
        ("graph_execution", "end", None),
    ]
    assert {e.thread_id for e in pub.events} == {"p1"} and {e.run_id for e in pub.events} == {
        cfg["run_id"]
    }
    assert len({e.event_id for e in pub.events}) == 6
    assert pub.events[2].data["next"] == "b" and pub.events[-1].data["status"] == "completed"
    assert all(e.content_type is ContentType.STATE for e in pub.events)
    assert "go" not in str([e.model_dump() for e in pub.events])  # no message contents
    state = await app.aget_state(cfg)
    assert state is not None and state.context[-1].text() == "from b"


@only("memory", "sqlite", "postgres")
@pytest.mark.anyio
async def test_errors_and_pauses_are_published(backend: Backend) -> None:
    pub = Recorder()
    app = two_nodes(fail_in_b=True).compile(checkpointer=backend.new(), publisher=pub)
    with pytest.raises(ValueError, match="b broke"):
        await app.ainvoke({"messages": ["go"]}, {"thread_id": "e"})
    assert pub.trail()[-2:] == [
        ("node_execution", "error", "b"),
        ("graph_execution", "error", None),
    ]
    assert pub.events[-1].content_type is ContentType.ERROR
    assert pub.events[-2].data["error_type"] == "ValueError"

    pub2 = Recorder()
    app2 = two_nodes(ask_in_b=True).compile(checkpointer=backend.new(), publisher=pub2)
    await app2.ainvoke({"messages": ["go"]}, {"thread_id": "i"})
    assert pub2.trail()[-2:] == [
        ("node_execution", "interrupted", "b"),
        ("graph_execution", "interrupted", None),
    ]
    await app2.ainvoke({"resume": "yes"}, {"thread_id": "i"})
    assert pub2.trail()[-1] == ("graph_execution", "end", None)


@only("memory", "sqlite")
@pytest.mark.anyio
async def test_a_failing_publisher_does_not_change_the_run(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    app = two_nodes().compile(checkpointer=backend.new(), publisher=Recorder(fail=True))
    out = await app.ainvoke({"messages": ["go"]}, {"thread_id": "f"})
    assert out["messages"][-1].text() == "from b"
    assert "publisher Recorder failed" in caplog.text


@only("memory")
@pytest.mark.anyio
async def test_a_failing_publisher_logs_one_traceback_per_run(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    pub = Recorder(fail=True)
    app = two_nodes().compile(checkpointer=backend.new(), publisher=pub)
    logger = "tenxgraph.core._publish"
    with caplog.at_level("DEBUG", logger=logger):
        await app.ainvoke({"messages": ["go"]}, {"thread_id": "quiet"})
        first = [r for r in caplog.records if r.name == logger]
        await app.ainvoke({"messages": ["again"]}, {"thread_id": "quiet"})
    records = [r for r in caplog.records if r.name == logger]
    # two runs, each with several events (graph start/end, two nodes' start/end)
    warnings = [r for r in records if r.levelname == "WARNING"]
    assert len(warnings) == 2 and all(r.exc_info is not None for r in warnings)
    debug = [r for r in records if r.levelname == "DEBUG"]
    assert len(first) >= 5 and len(debug) == len(records) - 2
    assert all(r.exc_info is None for r in debug)
    assert "failure 2" in debug[0].getMessage()


@only("memory")
@pytest.mark.anyio
async def test_aclose_closes_the_publisher_and_context_manager_use(backend: Backend) -> None:
    async with Recorder() as pub:
        app = two_nodes().compile(checkpointer=backend.new(), publisher=pub)
        await app.ainvoke({"messages": ["go"]}, {"thread_id": "c"})
        assert not pub.is_closed
    assert pub.is_closed
    pub2 = Recorder()
    g = StateGraph(publisher=pub2)  # the graph reference's place for it
    g.add_node("a", lambda state: "x")
    g.set_entry_point("a")
    g.add_edge("a", END)
    app = g.compile(checkpointer=backend.new())
    await app.ainvoke({"messages": ["go"]}, {"thread_id": "c"})
    assert pub2.trail()[0] == ("graph_execution", "start", None)
    await app.aclose()
    assert pub2.is_closed
    with pytest.raises(GraphError):
        g.compile(publisher=object())  # type: ignore[arg-type]


@pytest.fixture
def spans() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("publisher-test"), exporter


@only("memory", "sqlite", "postgres")
@pytest.mark.anyio
async def test_otel_publisher_makes_a_span_tree(
    backend: Backend, spans: tuple[Any, InMemorySpanExporter]
) -> None:
    tracer, exporter = spans
    g = two_nodes(fail_in_b=True)
    pub = setup_tracing(g, tracer=tracer, level=ObservabilityLevel.FULL)
    assert isinstance(pub, OtelPublisher)
    app = g.compile(checkpointer=backend.new())
    with pytest.raises(ValueError, match="b broke"):
        await app.ainvoke({"messages": ["go"]}, {"thread_id": "o"})
    finished = {
        s.name + ":" + str(s.attributes.get("tenxgraph.node.name")): s
        for s in exporter.get_finished_spans()
    }
    run = finished["tenxgraph.publisher.run:None"]
    a, b = finished["tenxgraph.publisher.node:a"], finished["tenxgraph.publisher.node:b"]
    assert a.parent.span_id == run.context.span_id and b.parent.span_id == run.context.span_id
    assert run.attributes["tenxgraph.thread.id"] == "o"
    assert b.status.status_code is StatusCode.ERROR and b.attributes["error.type"] == "ValueError"
    assert a.status.status_code is StatusCode.UNSET and "tenxgraph.publisher.data" in a.attributes
    await app.aclose()
    with pytest.raises(RuntimeError):
        await pub.publish(EventModel(event=Event.GRAPH_EXECUTION, event_type=EventType.START))


def test_otel_publisher_levels_and_bad_input() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    pub = OtelPublisher(tracer=provider.get_tracer("t"), level="spans")
    assert pub.level is ObservabilityLevel.SPANS
    with pytest.raises(GraphError):
        OtelPublisher(level="verbose")
    with pytest.raises(GraphError):
        setup_tracing(object())
    assert OtelPublisher().tracer is not None  # the global provider's tracer by default


def test_setup_tracing_refuses_what_is_not_a_graph_builder() -> None:
    """A compiled graph (its publisher is fixed at compile time), the class itself or any
    other object is refused with GRAPH_001 instead of being given a publisher to ignore."""
    g = two_nodes(fail_in_b=False)
    for bad in (g.compile(), StateGraph, object()):
        with pytest.raises(GraphError) as err:
            setup_tracing(bad)  # type: ignore[arg-type]  # wrong type on purpose
        assert err.value.error_code == "GRAPH_001"
        assert err.value.context == {"argument": "graph"}
