"""Time to erase a user with many threads: ``aerase_user`` (one batched statement, sent twice)
against deleting the same threads one by one with ``aclean_thread`` (a round trip per thread).

    python benchmarks/erase_user.py [--threads 1000] [--repeat 3] [--dsn postgresql://...]
                                    [--redis-url redis://127.0.0.1:6379/0]

For each configuration (Postgres alone; Postgres + Redis when ``--redis-url`` is given) and each
repeat: a fresh schema gets ``--threads`` threads of the user (each 3 versions: 3 turns of a
user message and an answer, one ledger entry), 100 threads of another user, and the Redis
copies that the writes put there; then the timed operation runs. Printed per configuration and
operation: the median wall-clock milliseconds, the rows and cache entries removed, and the
machine's load average (``os.getloadavg``) before the run, since the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tenxgraph.core.state import AgentState, Message  # noqa: E402
from tenxgraph.records import LedgerEntry  # noqa: E402
from tenxgraph.storage import serde  # noqa: E402
from tenxgraph.storage.checkpointer import PgCheckpointer  # noqa: E402

DEFAULT_DSN = os.environ.get("TENXGRAPH_DSN", "postgresql://postgres@127.0.0.1:5432/test")


async def _seed(cp: PgCheckpointer, user: str, n: int, tag: str) -> None:
    sem = asyncio.Semaphore(8)

    async def one(i: int) -> None:
        cfg = {"thread_id": f"{tag}-{user}-{i}", "user_id": user}
        async with sem:
            state = AgentState()
            for turn in range(3):
                state.context.append(Message.text_message(f"question {turn} " + "x" * 150))
                state.context.append(
                    Message.text_message(f"answer {turn} " + "y" * 150, role="assistant")
                )
                await cp.aput_state(cfg, state)
            entry = LedgerEntry(f"k{i}", f"c{i}", "tool", serde.dumps({"ok": i}), time.time())
            await cp.aledger_put(cfg, entry)

    await asyncio.gather(*(one(i) for i in range(n)))
    await cp.store.aflush()  # type: ignore[union-attr]


async def _drop_schema(dsn: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


async def _one(dsn: str, redis_url: str | None, threads: int, op: str) -> tuple[float, Any]:
    schema = f"bench_erase_{uuid.uuid4().hex[:8]}"
    prefix = f"bench-erase:{uuid.uuid4().hex[:8]}:"
    cp = PgCheckpointer(dsn, schema=schema, redis_url=redis_url, redis_prefix=prefix)
    try:
        await cp.asetup()
        await _seed(cp, "target", threads, "t")
        await _seed(cp, "bystander", 100, "b")
        t0 = time.perf_counter()
        if op == "aerase_user":
            result: Any = await cp.aerase_user("target")
        else:
            deleted = 0
            for i in range(threads):
                deleted += await cp.aclean_thread(
                    {"thread_id": f"t-target-{i}", "user_id": "target"}
                )
            result = deleted
        elapsed = (time.perf_counter() - t0) * 1000
        left = await cp.alist_threads({"user_id": "target"})
        assert not left, "threads left after the erasure"
        assert len(await cp.alist_threads({"user_id": "bystander"})) == 100
        return elapsed, result
    finally:
        await cp.aclose()
        await _drop_schema(dsn, schema)
        if redis_url:
            import redis.asyncio as aioredis

            client = aioredis.Redis.from_url(redis_url)
            keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
            if keys:
                await client.delete(*keys)
            await client.aclose()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dsn", default=DEFAULT_DSN)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--no-redis", action="store_true")
    args = ap.parse_args()
    configs: list[tuple[str, str | None]] = [("Postgres", None)]
    if not args.no_redis:
        configs.append(("Postgres + Redis", args.redis_url))
    print(
        f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
        f"{os.cpu_count()} CPUs; {args.threads} threads of the user, 100 of another"
    )
    print("| store | operation | median ms | runs (ms) | removed |")
    print("| --- | --- | --- | --- | --- |")
    for name, redis_url in configs:
        for op in ("aerase_user", "aclean_thread per thread"):
            times: list[float] = []
            last: Any = None
            for _ in range(args.repeat):
                ms, last = await _one(args.dsn, redis_url, args.threads, op)
                times.append(ms)
            if op == "aerase_user":
                removed = (
                    f"{last.total_rows:,} rows ({last.rows['messages']:,} messages), caches "
                    + ", ".join(f"{k} {v}" for k, v in last.caches.items())
                )
            else:
                removed = f"{last} threads"
            runs = ", ".join(f"{t:.0f}" for t in times)
            print(f"| {name} | {op} | {statistics.median(times):.1f} | {runs} | {removed} |")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
