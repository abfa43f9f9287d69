"""Per-step cost of tenxgraph on each deployment topology of docs/deployment.md, in ONE run.

Run::

    bash scripts/services.sh                  # PgBouncer on 6432, Redis Cluster on 7001-7003
    python benchmarks/bench_topologies.py     # prints a markdown table; --json FILE for samples

Contenders (the benchmark graph of benchmarks/README.md, 10 steps per run, a checkpoint after
every step), all on one private database ``tenxbench_<random>`` dropped at the end:

* ``floor``: ``BEGIN; INSERT 1 KB; COMMIT`` in one round trip, directly (the cheapest durable
  write);
* ``postgres``: ``PgCheckpointer`` straight to the server, plain tables (the reference);
* ``postgres via pgbouncer``: the same through PgBouncer in transaction mode (pooler detected,
  statements unprepared);
* ``postgres partitioned``: plain connection, tables hash-partitioned on ``thread_id`` (8);
* ``postgres+redis``: LRU + a single Redis + Postgres;
* ``postgres+redis cluster``: LRU + the three-master Redis Cluster + Postgres.

Samples are interleaved round by round with a rotating order (``_measure.measure_points``), so
the load of a shared machine falls on every contender alike; ratios to ``postgres`` are per
round (paired) and reported as median (min-max). The 1-minute load average is printed before
and after: figures taken on a loaded machine are comparable to each other, not to an idle run.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from typing import Any

from _contenders import FloorContender, TenxContender
from _measure import measure_points, paired_ratio
from _pg import BenchDatabase, server_info

DEFAULT_DSN = os.environ.get("TENXBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
DEFAULT_BOUNCER_PORT = int(os.environ.get("TENXBENCH_PGBOUNCER_PORT", "6432"))
DEFAULT_REDIS = os.environ.get("TENXBENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
DEFAULT_CLUSTER = os.environ.get("TENXBENCH_REDIS_CLUSTER_URL", "redis://127.0.0.1:7001")
PARTITIONS = 8


class TopologyContender(TenxContender):
    """``TenxContender`` with the topology's ``PgCheckpointer`` options.

    Args:
        name: display name.
        store: ``"postgres"`` or ``"postgres+redis"``.
        checkpointer_kwargs: extra ``PgCheckpointer`` arguments (``partitions``,
            ``redis_cluster`` ...).
        **kwargs: as ``TenxContender``.
    """

    def __init__(self, name: str, store: str, checkpointer_kwargs: dict[str, Any], **kwargs: Any):
        super().__init__(name, store, **kwargs)
        self.extra = checkpointer_kwargs

    def make_checkpointer(self) -> Any:
        from tenxgraph.storage.checkpointer import PgCheckpointer

        kw: dict[str, Any] = {
            "postgres_dsn": self.dsn,
            "schema": self.schema,
            "pool_config": {"max_size": self.pool_max},
            **self.extra,
        }
        if self.store == "postgres+redis":
            kw["redis_url"] = self.redis_url
            kw["redis_prefix"] = f"{self.redis_prefix}{self.schema}:"
        return PgCheckpointer(**kw)


def _bouncer_dsn(db: BenchDatabase, port: int) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(db.dsn, port=port)


def _cleanup_redis(url: str, prefix: str, cluster: bool) -> None:
    import redis
    from redis.cluster import RedisCluster

    client: Any = RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    try:
        kw = {"target_nodes": RedisCluster.PRIMARIES} if cluster else {}
        for key in client.scan_iter(match=prefix + "*", count=1000, **kw):
            client.delete(key)
    finally:
        client.close()


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run the contenders; return the results as a JSON-able dict."""
    prefix = f"tenxbench:{secrets.token_hex(4)}:"
    out: dict[str, Any] = {"load_before": os.getloadavg()}
    with BenchDatabase(args.dsn) as db:
        out["server"] = server_info(db.dsn)
        contenders = [
            FloorContender("floor", db.dsn),
            TopologyContender("postgres", "postgres", {}, dsn=db.dsn, schema="topo_direct"),
            TopologyContender(
                "postgres via pgbouncer",
                "postgres",
                {},
                dsn=_bouncer_dsn(db, args.pgbouncer_port),
                schema="topo_bouncer",
            ),
            TopologyContender(
                f"postgres partitioned ({PARTITIONS})",
                "postgres",
                {"partitions": PARTITIONS},
                dsn=db.dsn,
                schema="topo_partitioned",
            ),
            TopologyContender(
                "postgres+redis",
                "postgres+redis",
                {},
                dsn=db.dsn,
                schema="topo_redis",
                redis_url=args.redis_url,
                redis_prefix=prefix,
            ),
            TopologyContender(
                "postgres+redis cluster",
                "postgres+redis",
                {"redis_cluster": True},
                dsn=db.dsn,
                schema="topo_cluster",
                redis_url=args.redis_cluster_url,
                redis_prefix=prefix,
            ),
        ]
        try:
            for c in contenders:
                c.open()
            samples = dict.fromkeys(args.history, args.samples)
            points = measure_points(contenders, samples, log=lambda m: print(m, file=sys.stderr))
        finally:
            for c in contenders:
                c.close()
            _cleanup_redis(args.redis_url, prefix, cluster=False)
            _cleanup_redis(args.redis_cluster_url, prefix, cluster=True)
    out["load_after"] = os.getloadavg()
    out["points"] = {}
    for history, res in points.items():
        ref = res["postgres"]
        rows = []
        for pr in res.values():
            ratio = paired_ratio(pr, ref)
            rows.append(
                {
                    **pr.as_dict(),
                    "ratio_to_postgres": ratio.as_dict() if ratio else None,
                }
            )
        out["points"][history] = rows
    return out


def report(out: dict[str, Any]) -> str:
    """The markdown table of :func:`measure`'s result."""
    lines = [
        f"Load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in out['load_before'])}"
        f"; after: {', '.join(f'{x:.2f}' for x in out['load_after'])} (2 cores).",
        "",
    ]
    for history, rows in out["points"].items():
        lines += [
            f"History {history} messages before each run:",
            "",
            "| contender | ms/step median (min-max) | CPU ms/step | x postgres (paired) |",
            "| --- | --- | --- | --- |",
        ]
        for r in rows:
            ms = r["ms_per_step"]
            cpu = r["cpu_ms_per_step"]
            ratio = r["ratio_to_postgres"]
            lines.append(
                f"| {r['contender']} | {ms['median']:.2f} ({ms['min']:.2f}-{ms['max']:.2f}) "
                f"| {cpu['median']:.2f} | "
                + (
                    f"{ratio['median']:.2f} ({ratio['min']:.2f}-{ratio['max']:.2f})"
                    if ratio
                    else "-"
                )
                + " |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn", default=DEFAULT_DSN, help="Postgres server (superuser)")
    p.add_argument("--pgbouncer-port", type=int, default=DEFAULT_BOUNCER_PORT)
    p.add_argument("--redis-url", default=DEFAULT_REDIS)
    p.add_argument("--redis-cluster-url", default=DEFAULT_CLUSTER)
    p.add_argument("--samples", type=int, default=15, help="timed runs per contender and point")
    p.add_argument(
        "--history", type=int, nargs="+", default=[0, 1000], help="messages before each run"
    )
    p.add_argument("--json", help="write every figure to this file")
    args = p.parse_args(argv)
    out = measure(args)
    text = report(out)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
