"""The real 10xGraph running the benchmark graph, driven over stdin/stdout by ``_real10x.py``.

Started as ``PYTHON -I _real10x_worker.py STORE DSN REDIS_URL SCHEMA`` with the interpreter of
a second environment where ``pip install 10xgraph`` (Python 3.12+) was run: ``-I`` keeps the
checkout off ``sys.path``, so ``import tenxgraph`` is the published 10xGraph (its import name is
``tenxgraph`` too), and this folder is added by hand for ``_workload.py``, whose graph code
runs unchanged on both.

Protocol: one JSON object per line each way. ``{"op": "prepare", "history": N}`` answers
``{"thread_id": ...}``; ``{"op": "run", "thread_id": ...}`` runs one run of
:data:`~_workload.STEPS_PER_RUN` steps and answers ``{"wall_s": ..., "cpu_s": ...}``, timed
inside this process's event loop around ``await graph.ainvoke(...)`` with the same clocks as
every other contender; ``{"op": "close"}`` releases the checkpointer and exits. A failure
answers ``{"error": "..."}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _workload import STEPS_PER_RUN, build_tx_graph, tx_history_input, tx_input  # noqa: E402


def _checkpointer(store: str, dsn: str, redis_url: str, schema: str) -> Any:
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer, PgCheckpointer

    if store == "memory":
        return InMemoryCheckpointer()
    return PgCheckpointer(postgres_dsn=dsn, redis_url=redis_url, schema=schema)


async def _serve(store: str, dsn: str, redis_url: str, schema: str) -> None:
    cp = _checkpointer(store, dsn, redis_url, schema)
    setup = getattr(cp, "asetup", None)
    if setup is not None:
        await setup()
    app = build_tx_graph(cp)

    def config(thread_id: str) -> dict[str, Any]:
        return {"thread_id": thread_id, "user_id": "bench", "recursion_limit": 1000}

    loop = asyncio.get_running_loop()
    try:
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            req = json.loads(line)
            try:
                if req["op"] == "prepare":
                    tid = f"x10-{uuid.uuid4().hex[:12]}"
                    if req["history"] >= 2:
                        await app.ainvoke(tx_history_input(req["history"]), config(tid))
                    out: dict[str, Any] = {"thread_id": tid}
                elif req["op"] == "run":
                    inp, cfg = tx_input(), config(req["thread_id"])
                    c0 = time.process_time()
                    t0 = time.perf_counter()
                    await app.ainvoke(inp, cfg)
                    t1 = time.perf_counter()
                    c1 = time.process_time()
                    out = {"wall_s": t1 - t0, "cpu_s": c1 - c0, "steps": STEPS_PER_RUN}
                elif req["op"] == "close":
                    break
                else:
                    out = {"error": f"unknown op {req['op']!r}"}
            except Exception as exc:  # noqa: BLE001 - reported to the driving process
                out = {"error": f"{type(exc).__name__}: {exc}"}
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
    finally:
        release = getattr(cp, "arelease", None)
        if release is not None:
            await release()


if __name__ == "__main__":
    asyncio.run(_serve(*sys.argv[1:5]))
