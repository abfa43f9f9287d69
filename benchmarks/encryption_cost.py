"""Per-step cost of encryption at rest (``cipher=Keyring(...)``) on Postgres, as a ratio to the
same steps without a cipher (issue 33; target at most 1.10x).

Run: ``python benchmarks/encryption_cost.py [--dsn DSN] [--redis-url URL] [--turns N]``
(default: the test database, no Redis). Each round runs ``--turns`` turns of a three-node graph
(each node appends one message, so one durable checkpoint per node: a "step") on a thread that
already holds ``--history`` messages, once with a cipher and once without, on separate threads
of one fresh schema; the two variants alternate round by round so machine load hits both
alike. Printed (one JSON line per variant, then the ratios):

* ``step_ms``: median wall time of one step (round trip to Postgres included);
* ``step_cpu_us``: median client CPU of one step (``time.process_time``), where sealing and
  opening show up undiluted by the network;
* ``seal_open_us``: the sealing and opening one step does, timed alone on the step's real
  bytes (its values and one message sealed; the turn's first read opens the values once, a
  third of it per step): a floor for the ratio that machine load cannot blur;
* ``load``: the 1-minute load average before and after (``os.getloadavg``), and the cores.

The schema is dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import timeit
import uuid
from typing import Any

import psycopg

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.records import CheckpointWrite
from tenxgraph.storage import serde
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.storage.crypto import Keyring, seal_write
from tenxgraph.utils.constants import END

DSN = os.environ.get("TENXGRAPH_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
TEXT = "a typical reply of an assistant, about two hundred bytes long " * 3


def graph(cp: Any) -> Any:
    g = StateGraph(AgentState)
    for name, nxt in (("a", "b"), ("b", "c"), ("c", END)):
        g.add_node(
            name, lambda state, n=name: Message.text_message(f"{n}: {TEXT}", role="assistant")
        )
        g.add_edge(name, nxt)
    g.set_entry_point("a")
    return g.compile(checkpointer=cp)


async def round_of(app: Any, cfg: dict[str, Any], turns: int) -> tuple[float, float]:
    """Wall and CPU seconds per step over ``turns`` turns (three steps each)."""
    w0, c0 = time.perf_counter(), time.process_time()
    for i in range(turns):
        await app.ainvoke({"messages": [f"question {i}: {TEXT}"]}, dict(cfg))
    steps = 3 * turns
    return (time.perf_counter() - w0) / steps, (time.process_time() - c0) / steps


async def seal_open_us(cp: Any, cfg: dict[str, Any], ring: Keyring) -> float:
    """Microseconds of the sealing and opening of one step, on the thread's real bytes."""
    state = await cp.aget_state(dict(cfg))
    values = serde.encode_values(state, token="bench")
    row = serde.encode_message(state.context[-1])
    seq = len(state.context) + 1

    def seal() -> CheckpointWrite:
        w = CheckpointWrite(
            "t", "u", 7, values, [(seq, row)], ((1, seq + 1),), seq + 1, "r", 20, 1.0
        )
        return seal_write(ring, w)

    sealed = seal().values
    n = 5000
    seal_s = min(timeit.repeat(seal, number=n, repeat=5)) / n
    open_s = (
        min(
            timeit.repeat(lambda: ring.open(sealed, "checkpoints", "u", "t", 8), number=n, repeat=5)
        )
        / n
    )
    return (seal_s + open_s / 3) * 1e6


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    schema = "bench_enc_" + uuid.uuid4().hex[:8]
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
    load_before = os.getloadavg()[0]
    extra: dict[str, Any] = {}
    if args.redis_url:
        extra = {"redis_url": args.redis_url, "redis_prefix": f"{schema}:"}
    ring = Keyring({"k1": os.urandom(32)}, active="k1")
    cps = {
        "plain": PgCheckpointer(args.dsn, schema=schema, **extra),
        "sealed": PgCheckpointer(args.dsn, schema=schema, cipher=ring, **extra),
    }
    out: dict[str, Any] = {}
    try:
        for cp in cps.values():
            await cp.asetup()
        apps = {k: graph(cp) for k, cp in cps.items()}
        cfgs = {k: {"thread_id": f"t-{k}", "user_id": "u"} for k in cps}
        for k, app in apps.items():  # grow each thread to --history messages, warm the caches
            while True:
                state = await cps[k].aget_state(dict(cfgs[k]))
                if state is not None and len(state.context) >= args.history:
                    break
                await app.ainvoke({"messages": [f"warm {TEXT}"]}, dict(cfgs[k]))
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in cps}
        for r in range(args.rounds):
            order = list(cps) if r % 2 == 0 else list(reversed(cps))
            for k in order:
                samples[k].append(await round_of(apps[k], cfgs[k], args.turns))
        for k, s in samples.items():
            out[k] = {
                "step_ms": round(statistics.median(w for w, _ in s) * 1e3, 3),
                "step_cpu_us": round(statistics.median(c for _, c in s) * 1e6, 1),
                "rounds": len(s),
                "turns_per_round": args.turns,
                "history_messages": args.history,
            }
        crypto_us = await seal_open_us(cps["plain"], cfgs["plain"], ring)
        out["seal_open_us"] = round(crypto_us, 1)
        out["seal_open_share"] = round(crypto_us / out["plain"]["step_cpu_us"], 4)
        out["ratio_wall"] = round(out["sealed"]["step_ms"] / out["plain"]["step_ms"], 3)
        out["ratio_cpu"] = round(out["sealed"]["step_cpu_us"] / out["plain"]["step_cpu_us"], 3)
    finally:
        for cp in cps.values():
            await cp.aclose()
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[arg-type]
    out["load"] = {
        "loadavg_1m_before": round(load_before, 2),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
    }
    out["redis"] = bool(args.redis_url)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn", default=DSN)
    p.add_argument("--redis-url", default=None)
    p.add_argument("--turns", type=int, default=20, help="turns per round (3 steps each)")
    p.add_argument("--rounds", type=int, default=9, help="rounds per variant (alternated)")
    p.add_argument("--history", type=int, default=50, help="messages in each thread first")
    out = asyncio.run(main_async(p.parse_args()))
    for k in ("plain", "sealed"):
        print(json.dumps({"variant": k, **out[k]}))
    print(
        json.dumps(
            {
                "ratio_wall": out["ratio_wall"],
                "ratio_cpu": out["ratio_cpu"],
                "seal_open_us_per_step": out["seal_open_us"],
                "seal_open_share_of_step_cpu": out["seal_open_share"],
                "redis": out["redis"],
                **out["load"],
            }
        )
    )


if __name__ == "__main__":
    main()
