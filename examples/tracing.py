"""Tracing: tenxgraph's OpenTelemetry spans and metrics, sent to a collector or printed.

Run: python examples/tracing.py   (no server needed; embedded SQLite store)

tenxgraph depends on the OpenTelemetry *API* only; the application picks the SDK and the
exporter. This program installs them itself:

* with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set (e.g. ``http://localhost:4318`` for a collector,
  Jaeger or Grafana Tempo) and an OTLP exporter installed (``pip install
  opentelemetry-exporter-otlp``), spans and metrics go there (``OTEL_EXPORTER_OTLP_PROTOCOL``
  picks ``grpc`` or ``http/protobuf``; ``OTEL_SERVICE_NAME`` names the service);
* otherwise spans are printed by the SDK's console exporter, one line each as they end
  (children before their parent), and the metrics are summed up at the end;
* without ``opentelemetry-sdk`` at all (``pip install 'tenxgraph[otel]'``) the program still
  runs: the API's no-op tracer makes telemetry nearly free.

The graph is an agent that calls a weather tool, then answers; a scripted model stands in for
a real one. The second turn replays the tool node after a simulated crash, so the trace shows a
``tenxgraph.ledger.hit`` event: the tool is answered from the ledger, not run again.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message
from tenxgraph.models import ScriptedModel
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END


def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name.
    """
    return f"sunny in {city}"


def _otlp_exporters() -> tuple[Any, Any] | None:
    """OTLP span and metric exporters when an endpoint is configured and a package is there."""
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return None
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    flavours = ["grpc", "http"] if protocol == "grpc" else ["http", "grpc"]
    for flavour in flavours:
        try:
            if flavour == "grpc":
                from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                    OTLPMetricExporter,
                )
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            else:
                from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                    OTLPMetricExporter,
                )
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            continue
        return OTLPSpanExporter(), OTLPMetricExporter()
    print(
        "OTEL_EXPORTER_OTLP_ENDPOINT is set but no OTLP exporter is installed "
        "(pip install opentelemetry-exporter-otlp): printing spans instead"
    )
    return None


#: Attributes printed on each console line, with their short labels.
_SHOWN = {
    "db.operation.name": "op",
    "tenxgraph.checkpoint.version": "version",
    "tenxgraph.cache.hit": "hit",
    "tenxgraph.checkpoint.bytes": "bytes",
    "tenxgraph.node.replayed": "replayed",
}


def _line(span: Any) -> str:
    """One console line per span: ids to follow the tree, then the telling attributes."""
    a = dict(span.attributes or {})
    parent = f"{span.parent.span_id:016x}"[-4:] if span.parent else "----"
    what = (
        a.get("tenxgraph.cache.tier")
        or a.get("tenxgraph.node.name")
        or a.get("gen_ai.tool.name", "")
    )
    shown = {short: a[key] for key, short in _SHOWN.items() if key in a}
    events = " ".join(f"<{e.name}>" for e in span.events)
    status = " ERROR" if span.status.status_code.name == "ERROR" else ""
    return (
        f"{span.context.span_id:016x}"[-4:] + f" <- {parent}  {span.name:<38} {span.kind.name:<8} "
        f"{what:<11} {shown} {events}{status}\n"
    )


def setup_telemetry() -> tuple[Any, Any, Any] | None:
    """Install an SDK tracer provider and meter provider (the application's job, not
    tenxgraph's); returns ``(tracer_provider, meter_provider, metric_reader)``, or ``None``
    without the SDK."""
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import (
            InMemoryMetricReader,
            PeriodicExportingMetricReader,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
    except ImportError:
        print("opentelemetry-sdk is not installed: running without an exporter")
        return None
    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME", "tenxgraph-example")}
    )
    tracer_provider = TracerProvider(resource=resource)
    otlp = _otlp_exporters()
    reader: Any
    if otlp is not None:
        span_exporter, metric_exporter = otlp
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        reader = PeriodicExportingMetricReader(metric_exporter)
        print("sending traces and metrics to", os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"])
    else:
        tracer_provider.add_span_processor(
            SimpleSpanProcessor(ConsoleSpanExporter(formatter=_line))
        )
        reader = InMemoryMetricReader()
        print("span <- parent  name                                   kind     tier/node")
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return tracer_provider, meter_provider, reader


def print_metrics(reader: Any) -> None:
    """Sum every tenxgraph metric data point (console mode only)."""
    get = getattr(reader, "get_metrics_data", None)
    data = get() if get is not None else None
    if data is None:
        return
    print("\nmetrics:")
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for dp in m.data.data_points:
                    value = getattr(dp, "value", None)
                    shown = (
                        f"{value}" if value is not None else f"count={dp.count} sum={dp.sum:.6f}"
                    )
                    print(f"  {m.name:<38} {dict(dp.attributes or {})} {shown} {m.unit}")


def build(checkpointer: SqliteCheckpointer) -> Any:
    """An agent that calls ``get_weather`` and answers once the result is in."""

    def answer(messages: list[Message], tools: Any) -> Any:
        if messages[-1].role == "tool":
            return {"content": "It is sunny there."}
        return {
            "content": "",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
        }

    graph = StateGraph()
    graph.add_node("MAIN", Agent(model=ScriptedModel.from_fn(answer), tool_node="TOOL"))
    graph.add_node("TOOL", ToolNode([get_weather]))
    graph.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    graph.add_edge("TOOL", "MAIN")
    graph.set_entry_point("MAIN")
    return graph.compile(checkpointer=checkpointer)


def main() -> None:
    installed = setup_telemetry()
    folder = tempfile.mkdtemp(prefix="tenxgraph-tracing-")
    checkpointer = SqliteCheckpointer(os.path.join(folder, "tracing.sqlite"))
    app = build(checkpointer)
    config = {"thread_id": "weather-1", "user_id": "demo"}

    print("\n-- turn 1: the agent calls the tool, then answers")
    out = app.invoke({"messages": [Message.text_message("Weather in Paris?")]}, dict(config))
    print("agent:", out["messages"][-1].text())

    print("\n-- turn 2: the process 'dies' right after the tool ran; the replay uses the ledger")
    original = checkpointer.acommit

    async def lose_tool_checkpoint(cfg: dict, state: AgentState, prev: Any) -> Any:
        if state.context[-1].role == "tool":
            checkpointer.acommit = original  # type: ignore[method-assign]
            raise RuntimeError("simulated crash before the checkpoint")
        return await original(cfg, state, prev)

    checkpointer.acommit = lose_tool_checkpoint  # type: ignore[method-assign]
    try:
        app.invoke({"messages": [Message.text_message("And tomorrow?")]}, dict(config))
    except RuntimeError as exc:
        print("crashed:", exc)
    out = app.invoke(None, dict(config))  # resume: TOOL replays, answered from the ledger
    print("agent:", out["messages"][-1].text())
    checkpointer.close()

    if installed is not None:
        tracer_provider, meter_provider, reader = installed
        print_metrics(reader)
        tracer_provider.shutdown()
        meter_provider.shutdown()


if __name__ == "__main__":
    main()
