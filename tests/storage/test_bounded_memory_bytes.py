"""Memory bounded in bytes: 300 threads of 500 messages through one checkpointer stay within
the LRU's byte bound plus 32 MB of resident memory (issue 29).

Two things used to keep memory outside the LRU's bound: the facade's map of versions last
seen held each thread's whole decoded state (for up to 1,024 threads), and every encoded row
kept orjson's whole output buffer (4 KB at least for a 300-byte message) while the LRU counted
the row's length. The runs happen in a fresh interpreter, measured by its resident set size
after a garbage collection, so nothing the test process holds can hide or add growth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tenxgraph

THREADS = 300
MESSAGES = 500
SLACK_BYTES = 32 * 2**20

_CHILD = r"""
import asyncio, gc, json, os, sys

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import PgCheckpointer, SqliteCheckpointer
from tenxgraph.utils import END

kind, where, schema, threads, per = sys.argv[1:6]
threads, per = int(threads), int(per)


def rss():
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def main():
    if kind == "sqlite":
        cp = SqliteCheckpointer(where)
    else:
        fast = {"kwargs": {"options": "-c synchronous_commit=off"}}
        cp = PgCheckpointer(where, schema=schema, pool_config=fast)

    async def reply(state):
        return "ok"

    g = StateGraph()
    g.add_node("reply", reply)
    g.set_entry_point("reply")
    g.add_edge("reply", END)
    app = g.compile(checkpointer=cp)
    batch = [Message.text_message(f"message {i} " + "x" * 60) for i in range(per)]
    await app.ainvoke({"messages": batch[:1]}, {"thread_id": "warm", "user_id": "u"})
    before = rss()
    for t in range(threads):
        msgs = [m.model_copy(update={"message_id": f"{t}-{i}"}) for i, m in enumerate(batch)]
        out = await app.ainvoke({"messages": msgs}, {"thread_id": f"t{t}", "user_id": "u"})
        assert len(out["messages"]) == per + 1
        del msgs, out
    grew = rss() - before
    lru = cp.store.caches[0]
    print(json.dumps({"grew": grew, "lru_max_bytes": lru.max_bytes, "seen": len(cp._seen),
                      "seen_bytes": cp._seen_bytes}))
    await cp.aclose()


asyncio.run(main())
"""


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_300_threads_of_500_messages_stay_within_the_lru_bound_plus_32_mb(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where, schema = str(tmp_path / "long.db"), ""
    if kind == "postgres":
        where, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
    repo = Path(tenxgraph.__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(repo)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, where, schema, str(THREADS), str(MESSAGES)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    bound = got["lru_max_bytes"] + SLACK_BYTES
    assert got["grew"] < bound, (
        f"resident memory grew by {got['grew'] / 2**20:.1f} MB over {THREADS} threads "
        f"(bound {bound / 2**20:.0f} MB)"
    )
    # the versions map keeps versions, not states: a few hundred bytes per thread
    assert got["seen_bytes"] <= got["seen"] * 1024
