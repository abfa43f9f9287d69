"""``tenxgraph setup`` and ``tenxgraph threads``: schema setup and thread inspection."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from tenxgraph.cli._common import (
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CliError,
    _open,
    _store_spec,
)


# ==================================================================================================
# setup / threads
# ==================================================================================================
async def _cmd_setup(args: argparse.Namespace) -> int:
    spec = _store_spec(args)
    cp = await _open(spec)
    await cp.aclose()
    if spec.dsn and spec.redis_url:
        import redis.asyncio as aioredis

        from tenxgraph.core.exceptions import redact

        client = aioredis.Redis.from_url(spec.redis_url, socket_connect_timeout=5)
        try:
            await client.ping()
        except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
            raise CliError(
                f"schema ready on Postgres, but Redis is not reachable: {redact(str(exc))}",
                EXIT_UNREACHABLE,
            ) from None
        finally:
            await client.aclose()
    print(f"schema ready: {spec.describe()}")
    return EXIT_OK


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _fmt_time(ts: float | None) -> str:
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _describe_message(m: Any, width: int) -> str:
    calls = m.tool_calls() if m.role == "assistant" else []
    parts = []
    text = m.text()
    if text:
        parts.append(_short(text, width))
    for c in calls:
        parts.append(f"-> {c.name}({_short(json.dumps(c.args, ensure_ascii=False), 60)}) [{c.id}]")
    if m.role == "tool":
        parts = [f"[{m.tool_call_id}] " + _short(text, width - 20)]
    return " | ".join(parts) if parts else "(empty)"


async def _cmd_threads(args: argparse.Namespace) -> int:
    spec = _store_spec(args)
    cp = await _open(spec)
    try:
        cfg_user = {"user_id": args.user}
        if args.action == "list":
            threads = await cp.alist_threads(cfg_user, search=args.search, limit=args.limit)
            if args.json:
                print(
                    json.dumps(
                        [
                            {
                                "thread_id": t.thread_id,
                                "version": t.version,
                                "status": t.status,
                                "updated_at": t.updated_at,
                                "metadata": t.metadata,
                            }
                            for t in threads
                        ],
                        ensure_ascii=False,
                        indent=1,
                    )
                )
                return EXIT_OK
            if not threads:
                print(f"no threads for user {args.user!r}")
                return EXIT_OK
            print(f"{'thread_id':<48} {'version':>7}  {'status':<10} updated")
            for t in threads:
                print(f"{t.thread_id:<48} {t.version:>7}  {t.status:<10} {_fmt_time(t.updated_at)}")
            print(f"{len(threads)} thread(s) of user {args.user!r}")
            return EXIT_OK
        cfg = {"thread_id": args.thread_id, "user_id": args.user}
        if args.action == "show":
            state = await cp.aget_state(cfg)
            if state is None:
                print(
                    f"thread {args.thread_id!r} not found for user {args.user!r}", file=sys.stderr
                )
                return EXIT_MISMATCH
            meta = state.execution_meta
            version = cfg.get("_checkpoint_version")
            if args.json:
                print(
                    json.dumps(
                        {
                            "thread_id": args.thread_id,
                            "version": version,
                            "status": str(meta.status),
                            "messages": [m.model_dump(mode="json") for m in state.context],
                        },
                        ensure_ascii=False,
                        indent=1,
                    )
                )
                return EXIT_OK
            print(
                f"thread {args.thread_id}  version {version}  status {meta.status}  "
                f"next/last node {meta.current_node}  steps {meta.step}"
            )
            for i, m in enumerate(state.context):
                print(f"{i:>4} {m.role:<9} {_describe_message(m, args.width)}")
            return EXIT_OK
        if args.action == "history":
            snaps = await cp.aget_state_history(cfg, limit=args.limit)
            if not snaps:
                print(
                    f"thread {args.thread_id!r} not found for user {args.user!r}", file=sys.stderr
                )
                return EXIT_MISMATCH
            print(f"{'version':>7}  {'status':<10} {'next node':<12} {'messages':>8}  created")
            for s in snaps:
                print(
                    f"{s.version:>7}  {s.status:<10} {s.next_node or '-':<12} {len(s.state.context):>8}  "
                    f"{_fmt_time(s.created_at)}"
                )
            return EXIT_OK
        if args.action == "delete":
            if not args.yes:
                print("refusing to delete without --yes", file=sys.stderr)
                return EXIT_USAGE
            from tenxgraph.core.exceptions import StorageError

            try:
                existed = await cp.aclean_thread(cfg)
            except StorageError as exc:
                if exc.error_code == "STORAGE_FORBIDDEN_001":
                    print(
                        f"thread {args.thread_id!r} not found for user {args.user!r}",
                        file=sys.stderr,
                    )
                    return EXIT_MISMATCH
                raise
            if not existed:
                print(
                    f"thread {args.thread_id!r} not found for user {args.user!r}", file=sys.stderr
                )
                return EXIT_MISMATCH
            print(f"deleted thread {args.thread_id!r} (every version, message and ledger row)")
            return EXIT_OK
        raise CliError(f"unknown action {args.action!r}", EXIT_USAGE)
    finally:
        await cp.aclose()

