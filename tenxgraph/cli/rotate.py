"""``tenxgraph rotate-keys``: re-seal an encrypted store's rows under the active key, online.

::

    TENXGRAPH_KEYS="k1=...,k2=..." TENXGRAPH_ACTIVE_KEY=k2 \\
        tenxgraph rotate-keys --dsn postgresql://... \\
        --keyring tenxgraph.storage.crypto:keyring_from_env [--batch 500] [--json]

Runs :meth:`BaseCheckpointer.arotate_keys <tenxgraph.storage.checkpointer.base.BaseCheckpointer.
arotate_keys>` on the store named by the usual store options; safe while the application runs
(docs/how-to/encryption.md). Exit ``0`` when every row is under its owner's active key, ``1``
when rows were left behind or could not be opened (the report says how many, per table; run it
again, or restore the missing key), ``2`` for bad options (no keyring).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tenxgraph.cli._common import (
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    _add_store_args,
    _open,
    operator_spec,
)

__all__ = ["add_rotate_parser", "cmd_rotate"]


def add_rotate_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``tenxgraph rotate-keys`` on the command's subparsers."""
    r: argparse.ArgumentParser = sub.add_parser(
        "rotate-keys",
        help="re-seal an encrypted store's rows under the active key (online, resumable)",
        description="Re-seal every state, message and ledger row still sealed under an older "
        "key, in batches, while the application runs. Needs --keyring (or $TENXGRAPH_KEYRING) "
        "naming the keyring whose active key is the new one and which still holds the old "
        "ones. Stopped early, it resumes when run again.",
    )
    r.add_argument("--batch", type=int, default=500, help="rows per round trip (default 500)")
    r.add_argument(
        "--min-age",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="leave checkpoints younger than this for a later run (default 10)",
    )
    r.add_argument(
        "--seal-plaintext",
        action="store_true",
        help="also seal rows written before the store had a cipher",
    )
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_store_args(r, db_help="SQLite file (default: tenxgraph.sqlite)")
    return r


async def cmd_rotate(args: argparse.Namespace) -> int:
    """Run ``tenxgraph rotate-keys``; returns the exit code."""
    spec = operator_spec(args)
    if not spec.keyring:
        raise CliError(
            "rotate-keys needs --keyring package.module:attr (or $TENXGRAPH_KEYRING)", EXIT_USAGE
        )
    cp = await _open(spec, read_only=True)
    try:
        report = await cp.arotate_keys(
            batch=args.batch, min_age_s=args.min_age, seal_plaintext=args.seal_plaintext
        )
    finally:
        await cp.aclose()
    left = sum(report.unchanged.values()) + sum(report.unreadable.values()) + report.deferred
    if args.json:
        print(json.dumps(report.as_dict(), sort_keys=True))
    else:
        for table in report.resealed:
            print(
                f"{table}: {report.resealed[table]} re-sealed, {report.unchanged[table]} left "
                f"behind, {report.unreadable[table]} unreadable"
            )
        if report.deferred:
            print(
                f"{report.deferred} checkpoints younger than --min-age are still under an old "
                "key: run rotate-keys again once they are older (or with --min-age 0 when no "
                "writer is running)",
                file=sys.stderr,
            )
        if left:
            print(
                "some rows are not under the active key: run rotate-keys again; unreadable rows "
                "need their key back in the keyring (or --seal-plaintext for unsealed rows)",
                file=sys.stderr,
            )
    return EXIT_MISMATCH if left else EXIT_OK
