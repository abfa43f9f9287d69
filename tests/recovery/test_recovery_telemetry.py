"""Spans and metrics of background runs (issue 28): submitted, recovered, poisoned, retried,
finished, and the recovery delay; in a fresh interpreter with the OpenTelemetry SDK's in-memory
exporter and reader (the global providers of this process stay untouched)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = r'''
import asyncio, dataclasses, time
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.runs import retry_run
from tenxgraph.core.state import AgentState, Message
from tenxgraph.records import ThreadKey
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.telemetry import METRIC, SPAN
from tenxgraph.utils import END


async def node(state: AgentState) -> str:
    return "ok"


g = StateGraph()
g.add_node("n", node)
g.set_entry_point("n")
g.add_edge("n", END)
app = g.compile(checkpointer=InMemoryCheckpointer(lease_ttl_s=0.2, lease_renew_s=0.05))
store = app.checkpointer.store


async def cut_off(tid, crashes):
    """A run claimed by a worker that died at once (its lease lapses after 0.2 s)."""
    run = await app.asubmit({"messages": [Message.text_message("hi")]}, {"thread_id": tid})
    key = ThreadKey(tid, "anonymous")
    grant = await store.lease_acquire(key, "dead#1", ttl_s=0.2, lapse_s=0.2, queue=False)
    assert grant.fence is not None
    rec = await store.run_get(key, run.run_id)
    moved = await store.run_update(
        dataclasses.replace(rec, status="running", attempts=1, crashes=crashes, holder="dead#1",
                            worker="dead", updated_at=time.time() - 1),
        expect_status="pending", expect_attempts=0)
    assert moved
    return run.run_id


async def main():
    ok = await app.asubmit({"messages": [Message.text_message("hi")]}, {"thread_id": "ok"})
    lost = await cut_off("lost", 0)
    poison = await cut_off("poison", 2)
    async with app.recovery(sweep_interval_s=0.05, max_crashes=3):
        for tid, rid in (("ok", ok.run_id), ("lost", lost), ("poison", poison)):
            info = await app.ajoin({"thread_id": tid}, rid, timeout=10)
            assert info.status == ("error" if tid == "poison" else "completed"), info
        await retry_run(store, ThreadKey("poison", "anonymous"), poison)
        info = await app.ajoin({"thread_id": "poison"}, poison, timeout=10)
        assert info.status == "completed", info

asyncio.run(main())
names = [s.name for s in exporter.get_finished_spans()]
assert names.count(SPAN.RUN_SUBMIT) == 3, names
assert names.count(SPAN.RUN_RECOVER) == 1 and names.count(SPAN.RUN_EXECUTE) == 2, names
points = {}
for rm in reader.get_metrics_data().resource_metrics:
    for sm in rm.scope_metrics:
        for m in sm.metrics:
            for dp in m.data.data_points:
                points[(m.name, tuple(sorted((dp.attributes or {}).items())))] = getattr(dp, "value", None) or dp.count
assert points[(METRIC.RUNS_SUBMITTED, ())] == 3, points
assert points[(METRIC.RUNS_RECOVERED, ())] == 1, points
assert points[(METRIC.RUNS_POISONED, ())] == 1, points
assert points[(METRIC.RUNS_RETRIED, ())] == 1, points
assert points[(METRIC.RECOVERY_DELAY, ())] == 1, points
assert points[(METRIC.RUNS_FINISHED, (("tenxgraph.run.status", "completed"),))] == 3, points
print("ok")
'''


def test_background_run_spans_and_metrics() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CODE],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
