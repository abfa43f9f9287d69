"""Full ``get_state_history`` cost against the number of versions (memory store, every version
kept): decoding each stored message row once per call versus once per version.

    python benchmarks/history_decode.py [--versions 100 200 400]

Each turn adds two messages (question, answer), so version ``v`` holds ``2 v`` messages and the
thread ``2 n`` rows. "per version" decodes every record of the same history the way the call did
before it shared decoded rows (``BaseCheckpointer._decode`` without a memo); "per row" is
``aget_state_history`` itself. Prints seconds (best of 3) and messages decoded.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage import serde
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END


def _app(cp: Any) -> Any:
    async def answer(state: AgentState) -> Message:
        return Message.text_message(f"echo {state.context[-1].text()}", role="assistant")

    g = StateGraph()
    g.add_node("answer", answer)
    g.set_entry_point("answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=cp)


async def _per_version(cp: Any, cfg: dict[str, Any]) -> int:
    key = cp.key_for(cfg)
    recs = await cp.store.history(key, limit=None, before=None)
    for rec in recs:
        cp._decode(rec, AgentState)
    return len(recs)


async def _measure(n: int) -> tuple[float, int, float, int]:
    cp = InMemoryCheckpointer(state_history_limit=0)
    app = _app(cp)
    cfg = {"thread_id": f"h{n}"}
    for i in range(n):
        await app.ainvoke({"messages": [Message.text_message(f"q{i}")]}, dict(cfg))
    results = []
    for fn in (lambda: _per_version(cp, dict(cfg)), lambda: cp.aget_state_history(dict(cfg))):
        best = float("inf")
        for _ in range(3):
            before = serde.messages_decoded()
            t0 = time.perf_counter()
            await fn()
            best = min(best, time.perf_counter() - t0)
            decoded = serde.messages_decoded() - before
        results += [best, decoded]
    await cp.aclose()
    return results[0], results[1], results[2], results[3]


async def _main(versions: list[int]) -> None:
    print("| versions | rows | per version: s | decoded | per row: s | decoded |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in versions:
        a, da, b, db = await _measure(n)
        print(f"| {n} | {2 * n} | {a:.3f} | {da:,} | {b:.3f} | {db:,} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, nargs="+", default=[100, 200, 400])
    asyncio.run(_main(parser.parse_args().versions))
