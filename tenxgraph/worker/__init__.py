"""``tenxgraph worker``: a process that runs submitted (background) runs and recovers cut-off
ones, until SIGTERM or SIGINT.

It sits above ``tenxgraph.core`` (nothing below imports it): it loads a graph (``--config
10xgraph.json`` through :mod:`tenxgraph.appconfig`, or ``--graph module:attr``), optionally
runs it on the graph's own checkpointer, or, with ``--dsn`` (Postgres) or ``--db`` (SQLite), on
a checkpointer built from the options (``--schema``, ``--redis-url``, ``--redis-prefix``,
``--lease-ttl-s``; the lease timing and user isolation not given are the graph's checkpointer's),
and enters the graph's recovery loop (:class:`tenxgraph.core._recovery.Recovery`) with
``--concurrency`` slots. On SIGTERM / SIGINT it stops taking runs, lets the attempts in flight
finish for up to ``--grace-s`` seconds, cancels those still going (each goes back to
``pending``, not counted as a crash) and exits 0. The user's view:
docs/how-to/background-runs.md.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any

import anyio

from tenxgraph.core.exceptions import ConfigError

__all__ = ["add_worker_parser", "load_app", "run_worker", "worker_main"]

log = logging.getLogger("tenxgraph.worker")


def add_worker_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``worker`` subcommand to the ``tenxgraph`` command's subparsers.

    Args:
        sub: the ``argparse`` subparsers action of the ``tenxgraph`` parser.

    Returns:
        The ``worker`` parser.
    """
    w: argparse.ArgumentParser = sub.add_parser(
        "worker",
        help="run submitted background runs and recover cut-off ones",
        description="A long-running process that runs the runs submitted with app.asubmit() "
        "and finishes runs cut off by a crash, exactly once across workers. It uses the graph's "
        "own checkpointer unless --dsn or --db names another store. Stops on SIGTERM / SIGINT: "
        "runs in flight may finish for --grace-s seconds, those still going go back to pending.",
    )
    src = w.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="deployment config file (10xgraph.json / agentflow.json)")
    src.add_argument("--graph", help="the compiled graph as module:attr")
    store = w.add_mutually_exclusive_group()
    store.add_argument("--dsn", help="PostgreSQL DSN replacing the graph's checkpointer")
    store.add_argument("--db", help="SQLite file replacing the graph's checkpointer")
    w.add_argument("--redis-url", help="Redis cache URL (with --dsn)")
    w.add_argument("--schema", default=None, help="Postgres schema (with --dsn; default public)")
    w.add_argument(
        "--redis-prefix", default=None, help="prefix of the Redis keys (with --redis-url)"
    )
    w.add_argument(
        "--lease-ttl-s",
        type=float,
        default=None,
        help="run lease TTL in seconds (with --dsn / --db; default: the graph checkpointer's)",
    )
    w.add_argument(
        "--grace-s",
        type=float,
        default=30.0,
        help="seconds runs in flight may finish after SIGTERM before going back to pending "
        "(default 30)",
    )
    w.add_argument("--concurrency", type=int, default=4, help="runs at once (default 4)")
    w.add_argument(
        "--sweep-interval", type=float, default=1.0, help="seconds between sweeps (default 1)"
    )
    w.add_argument(
        "--max-crashes",
        type=int,
        default=3,
        help="crashes in a row after which a run is marked error (default 3)",
    )
    w.add_argument(
        "--listen-dsn",
        default=None,
        help="direct Postgres DSN for LISTEN when --dsn goes through PgBouncer (transaction mode)",
    )
    w.add_argument(
        "--retention-interval",
        type=float,
        default=60.0,
        help="seconds between two retention sweeps, which delete threads idle longer than "
        "their TTL (the checkpointer's thread_ttl_s or a thread's own; default 60)",
    )
    w.add_argument("--no-retention", action="store_true", help="no retention sweep in this worker")
    w.add_argument("--no-listen", action="store_true", help="sweep only (no LISTEN/NOTIFY)")
    w.add_argument("--worker-id", default=None, help="this worker's name in the runs' rows")
    return w


async def load_app(args: argparse.Namespace) -> Any:
    """The compiled graph the arguments name, on the store they name.

    Raises:
        ConfigError: ``CONFIG_001`` when the graph cannot be loaded, or a store option is given
            that does not apply (``--redis-url`` / ``--schema`` without ``--dsn``,
            ``--redis-prefix`` without ``--redis-url``, ``--lease-ttl-s`` without ``--dsn`` or
            ``--db``): none is ignored.
    """
    from tenxgraph.appconfig import load_config, load_graph

    app = await load_graph(load_config(args.config) if args.config else args.graph)
    needs = [
        ("--redis-url", args.redis_url, args.dsn, "--dsn"),
        ("--schema", args.schema, args.dsn, "--dsn"),
        ("--redis-prefix", args.redis_prefix, args.redis_url, "--redis-url"),
        ("--lease-ttl-s", args.lease_ttl_s, args.dsn or args.db, "--dsn or --db"),
    ]
    for flag, value, base, what in needs:
        if value is not None and base is None:
            raise ConfigError(
                f"{flag} needs {what} (without them the worker uses the graph's own "
                "checkpointer and its settings)",
                context={"key": flag},
            )
    if args.dsn is None and args.db is None:
        return app
    own = app.checkpointer
    ttl = float(args.lease_ttl_s) if args.lease_ttl_s is not None else float(own.lease_ttl_s)
    renew = float(own.lease_renew_s)
    common: dict[str, Any] = {
        "lease_ttl_s": ttl,
        "lease_renew_s": renew if renew < ttl else ttl / 2.5,
        "enforce_user_isolation": bool(own.enforce_user_isolation),
        "thread_ttl_s": getattr(own, "thread_ttl_s", None),
    }
    cp: Any
    if args.dsn is not None:
        from tenxgraph.storage.checkpointer import PgCheckpointer

        cp = PgCheckpointer(
            postgres_dsn=args.dsn,
            redis_url=args.redis_url,
            redis_prefix=args.redis_prefix or "tenxgraph:",
            schema=args.schema or "public",
            **common,
        )
    else:
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        cp = SqliteCheckpointer(args.db, **common)
    cp.state_class = app.state_class
    app.checkpointer = cp
    return app


async def run_worker(app: Any, args: argparse.Namespace) -> int:
    """Run the recovery loop of ``app`` until SIGTERM / SIGINT; returns the exit code (0)."""
    options: dict[str, Any] = {
        "concurrency": args.concurrency,
        "sweep_interval_s": args.sweep_interval,
        "max_crashes": args.max_crashes,
        "listen": not args.no_listen,
        "listen_dsn": args.listen_dsn,
        "grace_s": args.grace_s,
        "retention_interval_s": None if args.no_retention else args.retention_interval,
    }
    if args.worker_id:
        options["worker_id"] = args.worker_id
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with app.recovery(**options) as rec:
            print(f"tenxgraph worker {rec.worker_id} ready", file=sys.stderr, flush=True)
            async for _ in signals:
                break
        print(f"tenxgraph worker {rec.worker_id} stopped: {rec.stats}", file=sys.stderr, flush=True)
    await app.aclose()
    return 0


def worker_main(args: argparse.Namespace) -> int:
    """The ``tenxgraph worker`` command (asyncio event loop)."""

    async def go() -> int:
        app = await load_app(args)
        return await run_worker(app, args)

    return anyio.run(go)
