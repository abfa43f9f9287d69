"""The load-balancer chaos run at full size: 2,000 turns over 200 threads through HAProxy.

Three ``tenxgraph serve`` processes behind HAProxy (round robin, health checks on ``GET /ping``)
on one PostgreSQL schema and one Redis key prefix; the graph is two nodes that sleep 20 ms each
(``tests/server_lb/_lb_graph.py``), with the ``enqueue`` strategy and a 2 s lease. A driver sends
10 turns on each of 200 threads, every other turn streamed, with a 10xGraph client's retry loop
(same message id on every retry; a broken stream resumed from its last chunk), while a random
server is SIGKILLed every ``--kill-every`` seconds and restarted. Printed: turns sent,
acknowledged, stored, lost, duplicated; streams, broken, resumed, with a lost or repeated chunk;
kills, retries, and the errors the client saw. Exits 1 when anything was lost or duplicated.

    python benchmarks/server_chaos.py
    python benchmarks/server_chaos.py --threads 50 --turns 10 --kill-every 2

The CI test of the same run, bounded to about a minute, is
``tests/server_lb/test_lb_chaos.py``. Needs PostgreSQL (``--dsn``), Redis (``--redis-url``) and
HAProxy (``scripts/services.sh`` installs it); a private schema and key prefix are removed at
the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "server_lb"))

import psycopg  # noqa: E402
import redis  # noqa: E402
from _lb_chaos import chaos_env, run_chaos  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument(
        "--dsn",
        default=os.environ.get("TENXBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    ap.add_argument(
        "--redis-url", default=os.environ.get("TENXBENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--turns", type=int, default=10, help="turns per thread")
    ap.add_argument("--kill-every", type=float, default=3.0, help="seconds between two kills")
    ap.add_argument("--servers", type=int, default=3)
    ap.add_argument("--invoke-only", action="store_true", help="stream no turn")
    args = ap.parse_args()
    # A SIGTERM (timeout, Ctrl-C's cousin) unwinds through the finally blocks below, which
    # stop HAProxy and the servers and drop the schema.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    schema = "chaos_" + uuid.uuid4().hex[:10]
    prefix = f"tenxbench:{schema}:"
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        with tempfile.TemporaryDirectory() as tmp:
            counts, _ = run_chaos(
                Path(tmp),
                chaos_env(args.dsn, schema, args.redis_url, prefix),
                threads=args.threads,
                turns=args.turns,
                kill_every_s=args.kill_every,
                servers=args.servers,
                deadline_s=3600,
                streamed=not args.invoke_only,
            )
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        client = redis.Redis.from_url(args.redis_url)
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
    print(json.dumps(counts.summary(), indent=2))
    bad = (
        counts.turns_lost
        + counts.duplicates
        + counts.streams_lost_chunk
        + counts.streams_repeated_chunk
        + counts.out_of_order_threads
        + (counts.streams_broken - counts.streams_resumed)
    )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
