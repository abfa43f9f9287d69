"""The erasure and retention counters (``tenxgraph.erasure.*``, ``tenxgraph.retention.*``):
counts per tier and per table, never a user id or thread id. Run in a fresh interpreter with
its own meter provider, so no other test's provider interferes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_CODE = r"""
import asyncio, json, time
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer


async def main():
    cp = InMemoryCheckpointer(thread_ttl_s=60)
    for tid, user in (("secret-thread-1", "secret-user"), ("secret-thread-2", "secret-user"),
                      ("old-thread", "other-user")):
        st = AgentState(context=[Message.text_message("hello")])
        await cp.aput_state({"thread_id": tid, "user_id": user}, st)
    await cp.aerase_user("secret-user")
    await cp.asweep_threads(now=time.time() + 120)


asyncio.run(main())
out = []
data = reader.get_metrics_data()
for rm in data.resource_metrics:
    for sm in rm.scope_metrics:
        for m in sm.metrics:
            if m.name.startswith(("tenxgraph.erasure", "tenxgraph.retention")):
                for dp in m.data.data_points:
                    out.append([m.name, dict(dp.attributes or {}), dp.value])
print(json.dumps(out))
"""


def test_erasure_and_retention_counters() -> None:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.run(
        [sys.executable, "-c", _CODE], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    points = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "secret" not in proc.stdout  # no user or thread id in any attribute
    got = {(name, tuple(sorted(attrs.items()))): value for name, attrs, value in points}
    tier = ("tenxgraph.cache.tier", "memory")
    assert got[("tenxgraph.erasure.users", (tier,))] == 1
    assert got[("tenxgraph.erasure.threads", (tier,))] == 2
    rows = ("tenxgraph.erasure.rows", (("db.collection.name", "threads"), tier))
    assert got[rows] == 2
    assert got[("tenxgraph.retention.threads", (tier,))] == 1
    swept = ("tenxgraph.retention.rows", (("db.collection.name", "messages"), tier))
    assert got[swept] == 1
