"""The ``tenxgraph`` command: schema setup, thread inspection, the demo and the replay fleet.

::

    tenxgraph setup --dsn postgresql://...            create or migrate the schema
    tenxgraph threads list|show|history|delete ...    inspect threads, one user's scope at a time
    tenxgraph threads rewind|fork ... --yes           time travel (docs/how-to/time-travel.md)
    tenxgraph demo [--db FILE | --dsn ... --redis-url ...]
    tenxgraph replay DATA --workers N [--dsn ... --redis-url ...] [--kill-rate R]
    tenxgraph serve --config 10xgraph.json [--host H] [--port P] [--workers N]

Without ``--dsn`` every command uses the embedded SQLite store (``--db FILE``; the demo and
replay default to a file in a temporary folder). ``tenxgraph COMMAND --help`` documents each
command.

Every failure is ONE line on stderr (passwords masked) and an exit code (stable, for scripts;
also printed by ``tenxgraph --help``):

* ``0``: success (for ``replay`` and ``demo``: every thread verified against its recording).
  Output cut short by a closed pipe (``tenxgraph threads show T | head``) is not an error.
* ``1``: not found (a thread, for this user), or a check failed: a verification mismatch, a
  double tool execution.
* ``2``: usage or configuration: bad arguments or data, a DSN naming an unknown role, database
  or host, impossible TLS settings, missing tables (the message gives the ``tenxgraph setup``
  command to run), a schema newer than this code.
* ``3``: the store is unreachable or failing: connection refused, timeout, too many clients.
* ``4``: permission denied: password rejected, no ``pg_hba.conf`` entry, missing privileges.
* ``5``: stored data damaged: a row changed outside tenxgraph cannot be decoded; the line names
  the thread and version (restore the row, delete the thread, or read another version).

Only ``setup`` writes DDL; the ``threads`` commands never create or migrate anything.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from tenxgraph.cli._common import (
    EXIT_DAMAGED,
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_PERMISSION,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    _add_store_args,
    arg_secrets,
    cli_error,
    one_line,
)
from tenxgraph.cli.demo import _demo_async
from tenxgraph.cli.replay import _cmd_replay
from tenxgraph.cli.serve import add_serve_parser, cmd_serve
from tenxgraph.cli.threads import _cmd_setup, _cmd_threads

__all__ = [
    "EXIT_DAMAGED",
    "EXIT_MISMATCH",
    "EXIT_OK",
    "EXIT_PERMISSION",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "build_parser",
    "main",
]

#: ``threads`` actions that write: each refuses to run without ``--yes``.
_WRITES = frozenset({"delete", "rewind", "fork", "sweep"})

_EXIT_CODES_HELP = """\
exit codes (every failure is one line on stderr):
  0  ok
  1  not found (a thread, for this user) or a check failed
  2  usage or configuration: bad arguments, unknown role/database/host, missing tables
     (run tenxgraph setup), schema newer than this code
  3  storage unreachable (refused, timeout, too many clients)
  4  permission denied (Postgres or Redis password rejected, pg_hba.conf, privileges)
  5  stored data damaged (a row changed outside tenxgraph; the line names thread and version)"""


class _Parser(argparse.ArgumentParser):
    """``argparse`` with usage errors on one line (``prog: error: ...; see prog --help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


_MAX_INT64 = 2**63 - 1


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if value > _MAX_INT64:  # stores keep versions and counts as signed 64-bit integers
        raise argparse.ArgumentTypeError(f"must be at most {_MAX_INT64}, got {value}")
    return value


# ==================================================================================================
# argument parsing
# ==================================================================================================
def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``tenxgraph`` command (every subcommand has ``--help``)."""
    from tenxgraph import __version__

    p = _Parser(
        prog="tenxgraph",
        description="tenxgraph: durable, concurrency-safe agent graphs. Inspect stores, run the demo, "
        "replay recorded conversations on a fleet of worker processes.",
        epilog=_EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"tenxgraph {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser(
        "setup",
        help="create or migrate the schema (idempotent)",
        description="Create or migrate the tables (Postgres with --dsn, else the SQLite file --db).",
    )
    _add_store_args(s, db_help="SQLite file (default: tenxgraph.sqlite)")

    t = sub.add_parser(
        "threads",
        help="list, show, history, delete, rewind or fork threads of one user",
        description="Operator view of threads. Every action sees only the threads of --user "
        "(default 'anonymous'), exactly as the application does, unless --all-users asks for "
        "the admin scope. Never creates or migrates tables (tenxgraph setup does); only delete, "
        "rewind and fork write (each asks for --yes).",
        epilog=_EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tsub = t.add_subparsers(dest="action", metavar="ACTION")
    tsub.required = True
    for name, helptext in (
        ("list", "the user's threads, most recent first"),
        ("show", "a thread's current messages"),
        ("history", "a thread's kept versions, newest first"),
        ("delete", "delete a thread (every version, message and ledger row)"),
        ("rewind", "write a new head equal to a kept version (history keeps everything)"),
        ("fork", "copy a kept version into a new thread of the same user"),
    ):
        a = tsub.add_parser(
            name,
            help=helptext,
            description=helptext,
            epilog=_EXIT_CODES_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name != "list":
            a.add_argument("thread_id", help="the thread")
        who = a.add_mutually_exclusive_group()
        who.add_argument(
            "--user", default="anonymous", help="the user whose scope to use (default: anonymous)"
        )
        who.add_argument(
            "--all-users",
            action="store_true",
            help="admin scope: every user's threads (a thread is found whoever owns it)",
        )
        _add_store_args(a, db_help="SQLite file (default: tenxgraph.sqlite)")
        if name == "list":
            a.add_argument("--search", help="only threads whose id contains this text")
            a.add_argument(
                "--limit",
                type=_positive_int,
                default=100,
                help="at most this many threads (default 100)",
            )
        a.add_argument("--json", action="store_true", help="print JSON (for scripts)")
        if name == "show":
            a.add_argument(
                "--width",
                type=_positive_int,
                default=None,
                help="characters of text per message (default: fit the terminal)",
            )
        if name == "history":
            a.add_argument(
                "--limit", type=_positive_int, default=None, help="at most this many versions"
            )
        if name == "delete":
            a.add_argument("--yes", action="store_true", help="really delete")
        if name in ("rewind", "fork"):  # time travel (docs/how-to/time-travel.md)
            a.add_argument(
                "--version", type=_positive_int, required=True, help="the kept version to use"
            )
            if name == "fork":
                a.add_argument("--to", required=True, metavar="THREAD_ID", help="the new thread")
            a.add_argument("--yes", action="store_true", help=f"really {name} (it writes)")

    from tenxgraph.cli.retention import add_sweep_parser, add_users_parser

    add_sweep_parser(tsub)
    add_users_parser(sub)

    d = sub.add_parser(
        "demo",
        help="the main job in one command: multi-turn runs, a crash, a resume",
        description="Replays a few bundled recorded conversations turn by turn (printing the "
        "version each turn wrote), kills a worker process with SIGKILL in the middle of a run, "
        "resumes the thread and verifies every thread against its recording. Without --dsn it "
        "uses an embedded SQLite file in a temporary folder (or --db).",
    )
    _add_store_args(d, db_help="SQLite file (default: a new file in a temporary folder)")
    d.add_argument(
        "--data", help="a .jsonl file or folder of trajectories (default: the bundled ones)"
    )
    d.add_argument(
        "--conversations", type=int, default=2, help="conversations in part 1 (1 or 2, default 2)"
    )

    r = sub.add_parser(
        "replay",
        help="replay recorded conversations on N worker processes, with crashes",
        description="N worker processes take user turns from one queue, as behind a load "
        "balancer; each runs an Agent (replay model) + ToolNode (replay tools) graph. With "
        "--kill-rate, workers are SIGKILLed at random moments and restarted; unfinished threads "
        "are resumed. At the end every thread is verified against its recording.",
        epilog="exit codes: 0 every thread verified, 1 mismatch or double execution, 2 usage, "
        "3 storage unreachable",
    )
    r.add_argument(
        "data",
        nargs="?",
        default=None,
        help="a .jsonl file or a folder of them (default: the recordings bundled with tenxgraph)",
    )
    r.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    r.add_argument(
        "--concurrency", type=int, default=4, help="turns in flight per worker (default 4)"
    )
    r.add_argument(
        "--kill-rate",
        type=float,
        default=0.0,
        help="probability that a dispatched turn triggers a SIGKILL of its worker at a random "
        "moment (0 <= R < 1; default 0)",
    )
    r.add_argument(
        "--seed", type=int, default=0, help="random seed (dispatch, kills, --limit sample)"
    )
    r.add_argument(
        "--limit", type=int, default=None, help="replay a random sample of K conversations"
    )
    r.add_argument(
        "--restore-ids",
        action="store_true",
        help="restore the recordings' reused tool-call ids (undo the __dup2 renaming)",
    )
    r.add_argument(
        "--thread-prefix", default=None, help="prefix of the thread ids (default: unique per run)"
    )
    r.add_argument(
        "--history-limit", type=int, default=20, help="versions kept per thread (default 20)"
    )
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_store_args(r, db_help="SQLite file (default: a new file in a temporary folder)")
    # -- background runs: the runs operator view and the worker process
    from tenxgraph.cli.runs import add_runs_parser
    from tenxgraph.worker import add_worker_parser

    add_runs_parser(sub)
    add_worker_parser(sub)
    add_serve_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tenxgraph`` command.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit code (module docstring); the console script exits with it.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    # Retry warnings of the storage tiers are for applications' logs; the command reports the
    # outcome on one line instead (a handler on "tenxgraph" keeps logging's last resort quiet).
    pkg_log = logging.getLogger("tenxgraph")
    if not any(isinstance(h, logging.NullHandler) for h in pkg_log.handlers):
        pkg_log.addHandler(logging.NullHandler())
    if args.command is None:
        parser.error("a command is required")
    if args.command == "threads" and not getattr(args, "dsn", None):
        db = getattr(args, "db", None) or "tenxgraph.sqlite"
        if db != ":memory:" and not Path(db).exists():
            print(
                f"tenxgraph threads: no database file {db!r} (use --db PATH, or create it with: "
                f"tenxgraph setup --db {db})",
                file=sys.stderr,
            )
            return EXIT_USAGE
    if args.command == "replay" and args.limit is not None and args.limit < 1:
        print("tenxgraph replay: --limit must be >= 1", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "setup" and not args.dsn and not args.db:
        parser.error("setup needs --dsn (Postgres) or --db (SQLite file)")
    if args.command in ("threads", "users") and args.action in _WRITES | {"erase"}:
        if not args.yes:
            act = args.action
            print(
                f"tenxgraph {args.command} {act}: refusing to {act} without --yes",
                file=sys.stderr,
            )
            return EXIT_USAGE
    name = f"tenxgraph {args.command}" + (
        f" {args.action}" if args.command in ("threads", "runs", "users") else ""
    )
    try:
        if args.command == "setup":
            return asyncio.run(_cmd_setup(args))
        if args.command == "threads" and args.action == "sweep":
            from tenxgraph.cli.retention import cmd_sweep

            return asyncio.run(cmd_sweep(args))
        if args.command == "threads":
            return asyncio.run(_cmd_threads(args))
        if args.command == "users":
            from tenxgraph.cli.retention import cmd_users

            return asyncio.run(cmd_users(args))
        if args.command == "demo":
            return asyncio.run(_demo_async(args))
        if args.command == "replay":
            return _cmd_replay(args)
        if args.command == "runs":
            from tenxgraph.cli.runs import cmd_runs

            return asyncio.run(cmd_runs(args))
        if args.command == "worker":
            from tenxgraph.worker import worker_main

            return worker_main(args)
        if args.command == "serve":
            return cmd_serve(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - every failure is one line and an exit code
        secrets = arg_secrets(getattr(args, "dsn", None), getattr(args, "redis_url", None))
        err = cli_error(exc)
        print(f"{name}: {one_line(err, secrets)}", file=sys.stderr)
        return err.code
    parser.error(f"unknown command {args.command!r}")


def _silence_stdout() -> None:
    """After the reader of our stdout went away (``| head``), point stdout at /dev/null so the
    interpreter's final flush does not report the broken pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (e.g. captured in tests)
        pass


if __name__ == "__main__":
    sys.exit(main())
