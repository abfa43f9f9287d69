"""``tenxgraph.utils.metrics`` as 10xGraph's logging-and-metrics how-to describes it: named
counters and timers kept in the process (``snapshot``) and recorded on OpenTelemetry
instruments (counters, and histograms in milliseconds for timers, with an ``outcome``)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.utils import metrics
from tenxgraph.utils.metrics import (
    Counter,
    TimerMetric,
    counter,
    enable_metrics,
    setup_otel_metrics,
    snapshot,
    timer,
)


def unique(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:8]}"


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    rd = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[rd])
    assert setup_otel_metrics(provider.get_meter("compat-test")) is True
    try:
        yield rd
    finally:
        setup_otel_metrics(None)
        provider.shutdown()


def points(rd: InMemoryMetricReader, name: str) -> list[Any]:
    data = rd.get_metrics_data()
    found = []
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == name:
                    found.extend(m.data.data_points)
    return found


def test_counters_count_in_process_and_on_opentelemetry(reader: InMemoryMetricReader) -> None:
    name = unique("orders.processed")
    c = counter(name)
    assert isinstance(c, Counter) and counter(name) is c
    c.inc()
    c.inc(3, attributes={"channel": "web"})
    assert c.value == 4 and snapshot()["counters"][name] == 4
    by_attrs = {tuple(sorted(p.attributes.items())): p.value for p in points(reader, name)}
    assert by_attrs == {(): 1, (("channel", "web"),): 3}


def test_timers_record_milliseconds_with_an_outcome(reader: InMemoryMetricReader) -> None:
    name = unique("db_write_latency_ms")
    with timer(name, attributes={"table": "orders"}) as t:
        sum(range(1000))
    with pytest.raises(ZeroDivisionError), timer(name):
        1 / 0  # noqa: B018 - the block fails: the exception goes through unchanged
    assert isinstance(t, TimerMetric) and t.count == 2
    assert t.max_ms >= t.avg_ms > 0 and t.total_ms == pytest.approx(t.avg_ms * 2)
    snap = snapshot()["timers"][name]
    assert snap["count"] == 2 and snap["max_ms"] == t.max_ms
    outcomes = {p.attributes["outcome"]: p for p in points(reader, name)}
    assert set(outcomes) == {"ok", "error"}
    assert outcomes["ok"].attributes["table"] == "orders" and outcomes["ok"].count == 1
    t.observe(12.5, {"outcome": "manual"})
    assert t.max_ms >= 12.5 and t.count == 3


def test_enable_metrics_switches_recording_off_and_on() -> None:
    name = unique("switch")
    c = counter(name)
    try:
        enable_metrics(False)
        c.inc(10)
        with timer(name + ".t"):
            pass
        assert c.value == 0 and snapshot()["timers"][name + ".t"]["count"] == 0
    finally:
        enable_metrics(True)
    c.inc()
    assert c.value == 1


def test_counts_are_exact_under_threads() -> None:
    c = counter(unique("threads"))

    def work() -> None:
        for _ in range(2000):
            c.inc()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert c.value == 16000


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValidationError):
        counter("")
    with pytest.raises(ValidationError):
        counter(unique("neg")).inc(-1)
    with pytest.raises(ValidationError):
        metrics._timer_metric(unique("t")).observe(-0.5)  # noqa: SLF001
    with pytest.raises(ValidationError):
        enable_metrics("yes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        setup_otel_metrics(object())


def test_a_broken_exporter_never_reaches_the_caller() -> None:
    class Broken:
        def create_counter(self, *a: Any, **k: Any) -> Any:
            return self

        def create_histogram(self, *a: Any, **k: Any) -> Any:
            return self

        def add(self, *a: Any, **k: Any) -> None:
            raise RuntimeError("exporter down")

        def record(self, *a: Any, **k: Any) -> None:
            raise RuntimeError("exporter down")

    c = counter(unique("broken"))
    setup_otel_metrics(Broken())
    try:
        c.inc()
        with timer(unique("broken.t")):
            pass
    finally:
        setup_otel_metrics(None)
    assert c.value == 1


def test_node_and_tool_metrics_use_the_documented_names(reader: InMemoryMetricReader) -> None:
    # The how-to's agentflow.node.* / agentflow.tool.*, read as tenxgraph.*; node names unique
    # to this test so other tests' runs in this process do not count.
    import asyncio

    from tenxgraph.core.exceptions import NodeTimeoutError
    from tenxgraph.core.graph import StateGraph, ToolNode
    from tenxgraph.core.state import AgentState, Message, ToolCallBlock
    from tenxgraph.utils import END

    node_ok, node_bad, node_tools = unique("ask"), unique("fail"), unique("tools")

    def boom(city: str) -> str:
        """Fails."""
        raise ValueError("down")

    def fine(city: str) -> str:
        """Works."""
        return city

    def ask(state: AgentState) -> Message:
        return Message(
            role="assistant",
            content=[
                ToolCallBlock(id="c1", name="boom", args={"city": "x"}),
                ToolCallBlock(id="c2", name="fine", args={"city": "y"}),
            ],
        )

    async def slow(state: AgentState) -> str:
        await asyncio.sleep(5)
        return "late"

    g = StateGraph()
    g.add_node(node_ok, ask)
    g.add_node(node_tools, ToolNode([boom, fine]))
    g.add_node(node_bad, slow)
    g.set_entry_point(node_ok)
    g.add_edge(node_ok, node_tools)
    g.add_edge(node_tools, node_bad)
    g.add_edge(node_bad, END)
    app = g.compile()
    with pytest.raises(NodeTimeoutError):
        app.invoke({"messages": ["go"]}, {"thread_id": unique("t"), "node_timeout": 0.2})

    def by_node(name: str) -> dict[str, Any]:
        return {
            p.attributes["node"] + ":" + str(p.attributes.get("tool", "")): p.value
            for p in points(reader, name)
            if p.attributes["node"] in (node_ok, node_bad, node_tools)
        }

    assert by_node("tenxgraph.node.executions") == {
        f"{node_ok}:": 1,
        f"{node_tools}:": 1,
        f"{node_bad}:": 1,
    }
    assert by_node("tenxgraph.node.errors") == {f"{node_bad}:": 1}
    assert by_node("tenxgraph.node.timeouts") == {f"{node_bad}:": 1}
    assert by_node("tenxgraph.tool.calls") == {f"{node_tools}:boom": 1, f"{node_tools}:fine": 1}
    assert by_node("tenxgraph.tool.errors") == {f"{node_tools}:boom": 1}
    durations = {
        (p.attributes["node"], p.attributes["outcome"]): p.count
        for p in points(reader, "tenxgraph.node.duration")
        if p.attributes["node"] in (node_ok, node_bad)
    }
    assert durations == {(node_ok, "ok"): 1, (node_bad, "error"): 1}
    assert snapshot()["counters"]["tenxgraph.tool.calls"] >= 2
