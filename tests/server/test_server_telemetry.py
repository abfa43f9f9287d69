"""The server span: one SERVER span per request (HTTP semantic conventions), child of the
client's W3C ``traceparent``, parent of the run span. Runs in a fresh interpreter with the SDK
installed there (the test process's global tracer provider stays untouched)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import asyncio

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState
from tenxgraph.server import create_app
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END


def answer(state: AgentState) -> str:
    return "hi"


g = StateGraph(AgentState)
g.add_node("answer", answer)
g.set_entry_point("answer")
g.add_edge("answer", END)
app = create_app(g.compile(checkpointer=InMemoryCheckpointer()))

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


async def main():
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
        transport=transport, base_url="http://test"
    ) as c:
        r = await c.post(
            "/v1/graph/invoke",
            json={"messages": [{"role": "user", "content": "x"}], "config": {"thread_id": "t1"}},
            headers={"traceparent": f"00-{TRACE}-{PARENT}-01"},
        )
        assert r.status_code == 200, r.text
        r = await c.get("/v1/threads/t1/state")
        assert r.status_code == 200
        r = await c.post(
            "/v1/graph/stream",
            json={"messages": [{"role": "user", "content": "y"}], "config": {"thread_id": "t2"}},
            headers={"traceparent": f"00-{TRACE}-{PARENT}-01"},
        )
        assert r.status_code == 200 and r.text.count("\n") >= 3, r.text


asyncio.run(main())
spans = exporter.get_finished_spans()
servers = [s for s in spans if s.kind == SpanKind.SERVER]
names = [s.name for s in servers]
assert names == ["POST /v1/graph/invoke", "GET /v1/threads/{thread_id}/state", "POST /v1/graph/stream"], names
inv = servers[0]
assert format(inv.context.trace_id, "032x") == TRACE
assert format(inv.parent.span_id, "016x") == PARENT
attrs = dict(inv.attributes)
assert attrs["http.request.method"] == "POST" and attrs["http.response.status_code"] == 200
assert attrs["http.route"] == "/v1/graph/invoke" and attrs["url.path"] == "/v1/graph/invoke"
run = [s for s in spans if s.name == "tenxgraph.run"]
assert run and run[0].parent.span_id == inv.context.span_id, [(s.name, s.parent) for s in spans]
assert dict(servers[1].attributes)["url.path"] == "/v1/threads/t1/state"
# the streamed run runs in the app's task group, still under the request's span
assert len(run) == 2 and run[1].parent.span_id == servers[2].context.span_id
print("ok")
"""


def test_server_span_honours_traceparent_and_parents_the_run_span() -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
