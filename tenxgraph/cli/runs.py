"""``tenxgraph runs``: list the submitted (background) runs and retry failed ones.

``runs list`` shows one user's runs (``--all-users``: every owner's), newest first, optionally
of one ``--status`` (``error`` lists the poison runs) and one ``--thread``. ``runs retry
RUN_ID --thread T`` puts an ``error`` or ``cancelled`` run back to ``pending``; a worker picks
it up (docs/how-to/background-runs.md). Neither creates or migrates tables.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from tenxgraph.cli._common import (
    EXIT_MISMATCH,
    EXIT_OK,
    CliError,
    StoreSpec,
    _add_store_args,
    _open,
    operator_spec,
)
from tenxgraph.cli._text import safe
from tenxgraph.run_records import RUN_STATUSES

__all__ = ["add_runs_parser", "cmd_runs"]


def add_runs_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``runs`` subcommand (``list``, ``retry``) to the ``tenxgraph`` subparsers.

    Args:
        sub: the ``argparse`` subparsers action of the ``tenxgraph`` parser.

    Returns:
        The ``runs`` parser.
    """
    r: argparse.ArgumentParser = sub.add_parser(
        "runs",
        help="list background runs, retry failed ones",
        description="Operator view of the runs submitted with app.asubmit().",
    )
    rsub = r.add_subparsers(dest="action", metavar="ACTION")
    rsub.required = True
    for name, helptext in (
        ("list", "background runs, newest first"),
        ("retry", "put an error or cancelled run back to pending"),
    ):
        a = rsub.add_parser(name, help=helptext, description=helptext)
        if name == "retry":
            a.add_argument("run_id", help="the run")
            a.add_argument("--thread", required=True, help="the run's thread")
            a.add_argument("--user", default="anonymous", help="the run's user (default anonymous)")
        else:
            who = a.add_mutually_exclusive_group()
            who.add_argument("--user", default="anonymous", help="whose runs (default anonymous)")
            who.add_argument("--all-users", action="store_true", help="every user's runs")
            a.add_argument("--status", choices=RUN_STATUSES, default=None, help="only this status")
            a.add_argument("--thread", default=None, help="only this thread")
            a.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
            a.add_argument("--json", action="store_true", help="print JSON (for scripts)")
        _add_store_args(a, db_help="SQLite file (default: tenxgraph.sqlite)")
    return r


def _spec(args: argparse.Namespace) -> StoreSpec:
    return operator_spec(args)


async def cmd_runs(args: argparse.Namespace) -> int:
    """Run ``tenxgraph runs list`` / ``retry``; returns the exit code."""
    from tenxgraph.core.exceptions import ResourceNotFoundError
    from tenxgraph.core.runs import retry_run
    from tenxgraph.records import ThreadKey

    cp = await _open(_spec(args), read_only=True)
    try:
        store: Any = cp.store
        if args.action == "retry":
            user = args.user if cp.enforce_user_isolation else "*"
            try:
                rec = await retry_run(store, ThreadKey(args.thread, user), args.run_id)
            except ResourceNotFoundError as exc:
                # Exit 1 like `threads show` for a missing thread: not found for this user.
                raise CliError(exc.message, EXIT_MISMATCH) from None
            print(f"run {rec.run_id} is pending again (attempts so far: {rec.attempts})")
            return EXIT_OK
        owner = "" if args.all_users else (args.user if cp.enforce_user_isolation else "*")
        rows = await store.run_list(
            owner, status=args.status or "", thread_id=args.thread or "", limit=args.limit
        )
        if args.json:
            print(
                json.dumps(
                    [
                        {
                            "run_id": r.run_id,
                            "thread_id": r.thread_id,
                            "status": r.status,
                            "attempts": r.attempts,
                            "crashes": r.crashes,
                            "worker": r.worker,
                            "last_error": r.last_error,
                            "created_at": r.created_at,
                            "updated_at": r.updated_at,
                        }
                        for r in rows
                    ]
                )
            )
            return EXIT_OK
        for r in rows:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.updated_at))
            print(
                f"{safe(r.run_id)}  {safe(r.thread_id)}  {r.status:<11} attempts={r.attempts}  "
                f"{when}Z  {safe(r.last_error)[:120]}"
            )
        if not rows:
            print("no runs")
        return EXIT_OK
    finally:
        await cp.aclose()
