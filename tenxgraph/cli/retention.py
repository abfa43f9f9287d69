"""``tenxgraph users erase`` and ``tenxgraph threads sweep``: erasure and retention.

Both check that the tables exist (never creating or migrating them), write only with
``--yes``, and print the counts (``--json`` for scripts). The library calls are
``checkpointer.aerase_user`` and ``checkpointer.asweep_threads``
(docs/how-to/erasure-retention.md).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tenxgraph.cli._common import (
    DEFAULT_TIMEOUT_S,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    _add_store_args,
    _open,
    _store_spec,
)

__all__ = ["add_sweep_parser", "add_users_parser", "cmd_sweep", "cmd_users"]


def _positive_seconds(text: str) -> float:
    from tenxgraph.storage.retention import check_thread_ttl

    try:
        value = float(text)
        ttl = check_thread_ttl(value, "--thread-ttl-s", allow_none=False)
    except Exception:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds > 0 ('inf': never), got {text!r}"
        ) from None
    assert ttl is not None
    return ttl


def add_users_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``tenxgraph users erase`` to the command's subparsers.

    Args:
        sub: the subparsers action of the ``tenxgraph`` parser.

    Returns:
        The ``users`` parser.
    """
    u: argparse.ArgumentParser = sub.add_parser(
        "users",
        help="erase everything stored of a user",
        description="Operator actions on a user's data.",
    )
    usub = u.add_subparsers(dest="action", metavar="ACTION")
    usub.required = True
    e = usub.add_parser(
        "erase",
        help="remove every thread, version, message, ledger entry, lease, run and cached copy "
        "of a user",
        description="Remove everything stored of USER_ID from the store and its caches "
        "(Postgres, Redis with --redis-url, or the SQLite file): checkpointer.aerase_user. "
        "Prints the rows removed per table and the entries per cache tier.",
    )
    e.add_argument("user_id", help="the user")
    e.add_argument(
        "--no-isolation",
        action="store_true",
        help="the application runs with enforce_user_isolation=False: the store records no "
        "owner, so name the user's threads with --thread-id",
    )
    e.add_argument(
        "--thread-id",
        action="append",
        default=None,
        metavar="THREAD_ID",
        help="a thread of the user (repeat; only with --no-isolation)",
    )
    e.add_argument("--yes", action="store_true", help="really erase")
    e.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    _add_store_args(e, db_help="SQLite file (default: tenxgraph.sqlite)")
    return u


def add_sweep_parser(tsub: Any) -> argparse.ArgumentParser:
    """Add ``tenxgraph threads sweep`` to the ``threads`` subparsers.

    Args:
        tsub: the subparsers action of the ``threads`` parser.

    Returns:
        The ``sweep`` parser.
    """
    s: argparse.ArgumentParser = tsub.add_parser(
        "sweep",
        help="delete threads idle longer than their time to live",
        description="Delete every thread whose last checkpoint is older than its time to live "
        "(its own, set with aset_thread_ttl, else --thread-ttl-s), except threads holding a "
        "live run lease or an open background run: checkpointer.asweep_threads. The worker "
        "does the same every --retention-interval seconds.",
    )
    s.add_argument(
        "--thread-ttl-s",
        type=_positive_seconds,
        default=None,
        help="the default time to live in seconds of threads without their own (default: "
        "none, only threads with their own TTL expire)",
    )
    s.add_argument("--yes", action="store_true", help="really delete")
    s.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    _add_store_args(s, db_help="SQLite file (default: tenxgraph.sqlite)")
    return s


def _report(kind: str, result: Any, as_json: bool, extra: dict[str, Any]) -> None:
    data = {
        **extra,
        "threads": list(result.thread_ids),
        "rows": dict(result.rows),
        "caches": dict(result.caches),
        "pending": list(result.pending),
    }
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return
    rows = ", ".join(f"{t} {n}" for t, n in result.rows.items() if n) or "none"
    caches = ", ".join(f"{t} {n}" for t, n in result.caches.items()) or "none"
    print(f"{kind} {result.threads} thread(s); rows: {rows}; cache entries: {caches}")
    if result.pending:
        print(
            f"not reached: {', '.join(result.pending)} (their entries expire and are never "
            "served; run the command again when they are back)"
        )


async def cmd_users(args: argparse.Namespace) -> int:
    """Run ``tenxgraph users erase``; returns the exit code."""
    from tenxgraph.core.config import normalize_config

    if args.thread_id and not args.no_isolation:
        raise CliError("--thread-id needs --no-isolation (with isolation the owner is known)", 2)
    if args.no_isolation and not args.thread_id:
        raise CliError("--no-isolation needs the user's threads as --thread-id", EXIT_USAGE)
    normalize_config({"thread_id": "-", "user_id": args.user_id}, new_run=False)
    spec = _store_spec(args)
    spec.timeout_s = args.timeout if args.timeout is not None else DEFAULT_TIMEOUT_S
    cp = await _open(spec, read_only=True)
    try:
        result = await cp.aerase_user(args.user_id, thread_ids=args.thread_id)
    finally:
        await cp.aclose()
    _report("erased", result, args.json, {"user_id": args.user_id})
    return EXIT_OK


async def cmd_sweep(args: argparse.Namespace) -> int:
    """Run ``tenxgraph threads sweep``; returns the exit code."""
    spec = _store_spec(args)
    spec.timeout_s = args.timeout if args.timeout is not None else DEFAULT_TIMEOUT_S
    cp = await _open(spec, read_only=True)
    try:
        result = await cp.asweep_threads()
    finally:
        await cp.aclose()
    _report("expired", result, args.json, {"batches": result.batches})
    return EXIT_OK
