"""``tenxgraph setup`` and ``tenxgraph threads``: schema setup and thread inspection.

``setup`` is the only command that writes DDL. The ``threads`` commands check that the tables
exist (never creating or migrating them) and see one user's threads, as the application does,
unless ``--all-users`` asks for the admin scope
(``tenxgraph.storage.checkpointer.ADMIN_SCOPE``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from typing import Any

from tenxgraph.cli._common import (
    DEFAULT_TIMEOUT_S,
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_UNREACHABLE,
    CliError,
    StoreSpec,
    _open,
    _store_spec,
    one_line,
)


def _spec(args: argparse.Namespace) -> StoreSpec:
    spec = _store_spec(args)
    spec.timeout_s = args.timeout if args.timeout is not None else DEFAULT_TIMEOUT_S
    return spec


async def _cmd_setup(args: argparse.Namespace) -> int:
    spec = _spec(args)
    cp = await _open(spec)
    await cp.aclose()
    if spec.dsn and spec.redis_url:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(spec.redis_url, socket_connect_timeout=5)
        try:
            await client.ping()
        except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
            raise CliError(
                f"schema ready on Postgres, but Redis is not reachable: {one_line(exc)}",
                EXIT_UNREACHABLE,
            ) from None
        finally:
            await client.aclose()
    print(f"schema ready: {spec.describe()}")
    return EXIT_OK


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    width = max(width, 2)
    return text if len(text) <= width else text[: width - 1] + "…"


def _fmt_time(ts: float | None) -> str:
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _columns() -> int:
    """The terminal's width in characters (80 when not a terminal and COLUMNS is unset)."""
    return max(40, shutil.get_terminal_size((80, 24)).columns)


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
    return _short(" | ".join(parts), width) if parts else "(empty)"


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=1))


def _not_found(args: argparse.Namespace) -> int:
    who = "any user" if args.all_users else f"user {args.user!r}"
    print(f"tenxgraph threads {args.action}: thread {args.thread_id!r} not found for {who}",
          file=sys.stderr)  # fmt: skip
    return EXIT_MISMATCH


def _list_table(threads: list[Any], all_users: bool) -> None:
    """Print ``threads`` as a table that fits the terminal (long ids end with an ellipsis)."""
    cols = _columns()
    fixed = 7 + 2 + 10 + 1 + 19 + 1  # version, status, updated
    owner_w = 0
    if all_users:
        owner_w = min(max([len("owner"), *(len(t.user_id) for t in threads)]), 16)
        fixed += owner_w + 1
    id_w = max(8, min(max([len("thread_id"), *(len(t.thread_id) for t in threads)]), cols - fixed))
    owner_h = f"{'owner':<{owner_w}} " if all_users else ""
    print(f"{'thread_id':<{id_w}} {owner_h}{'version':>7}  {'status':<10} updated")
    for t in threads:
        owner = f"{_short(t.user_id, owner_w):<{owner_w}} " if all_users else ""
        print(
            f"{_short(t.thread_id, id_w):<{id_w}} {owner}{t.version:>7}  {_short(t.status, 10):<10} "
            f"{_fmt_time(t.updated_at)}"
        )


async def _owner_of(cp: Any, thread_id: str) -> str | None:
    """The owner of ``thread_id`` (admin scope), or ``None`` when it does not exist."""
    from tenxgraph.storage.checkpointer import ADMIN_SCOPE

    for info in await cp.alist_threads({"user_id": ADMIN_SCOPE}, search=thread_id):
        if info.thread_id == thread_id:
            return str(info.user_id)
    return None


async def _cmd_threads(args: argparse.Namespace) -> int:
    from tenxgraph.core.config import normalize_config
    from tenxgraph.storage.checkpointer import ADMIN_SCOPE

    # Validate what the user typed before touching the store (one line, exit 2).
    if args.user == "*":
        raise CliError("'*' is not a user id; use --all-users to see every user's threads", 2)
    if args.action != "list":
        normalize_config({"thread_id": args.thread_id, "user_id": args.user}, new_run=False)
    elif not args.all_users:
        normalize_config({"thread_id": "-", "user_id": args.user}, new_run=False)
    spec = _spec(args)
    cp = await _open(spec, read_only=True)
    try:
        if args.action == "list":
            scope = ADMIN_SCOPE if args.all_users else args.user
            threads = await cp.alist_threads({"user_id": scope}, search=args.search, limit=args.limit)
            if args.json:
                _print_json(
                    [
                        {
                            "thread_id": t.thread_id,
                            "user_id": t.user_id,
                            "version": t.version,
                            "status": t.status,
                            "created_at": t.created_at,
                            "updated_at": t.updated_at,
                            "metadata": t.metadata,
                        }
                        for t in threads
                    ]
                )
                return EXIT_OK
            who = "any user" if args.all_users else f"user {args.user!r}"
            if not threads:
                print(f"no threads for {who}")
                return EXIT_OK
            _list_table(threads, args.all_users)
            print(f"{len(threads)} thread(s) of {who}")
            return EXIT_OK
        user = args.user
        if args.all_users:
            owner = await _owner_of(cp, args.thread_id)
            if owner is None:
                return _not_found(args)
            user = owner
        cfg: dict[str, Any] = {"thread_id": args.thread_id, "user_id": user}
        if args.action == "show":
            state = await cp.aget_state(cfg)
            if state is None:
                return _not_found(args)
            meta = state.execution_meta
            version = cfg.get("_checkpoint_version")
            if args.json:
                _print_json(
                    {
                        "thread_id": args.thread_id,
                        "user_id": user,
                        "version": version,
                        "status": str(meta.status),
                        "current_node": meta.current_node,
                        "step": meta.step,
                        "messages": [m.model_dump(mode="json") for m in state.context],
                    }
                )
                return EXIT_OK
            print(
                _short(
                    f"thread {args.thread_id}  version {version}  status {meta.status}  "
                    f"next/last node {meta.current_node}  steps {meta.step}",
                    _columns(),
                )
            )
            width = args.width if args.width is not None else _columns() - 15
            for i, m in enumerate(state.context):
                print(f"{i:>4} {m.role:<9} {_describe_message(m, width)}")
            return EXIT_OK
        if args.action == "history":
            snaps = await cp.aget_state_history(cfg, limit=args.limit)
            if not snaps:
                return _not_found(args)
            if args.json:
                _print_json(
                    [
                        {
                            "version": s.version,
                            "status": s.status,
                            "next_node": s.next_node,
                            "messages": len(s.state.context),
                            "created_at": s.created_at,
                        }
                        for s in snaps
                    ]
                )
                return EXIT_OK
            print(f"{'version':>7}  {'status':<10} {'next node':<12} {'messages':>8}  created")
            for s in snaps:
                print(
                    f"{s.version:>7}  {_short(s.status, 10):<10} {_short(s.next_node or '-', 12):<12} "
                    f"{len(s.state.context):>8}  {_fmt_time(s.created_at)}"
                )
            return EXIT_OK
        if args.action == "delete":
            if not args.yes:
                raise CliError("refusing to delete without --yes", 2)
            from tenxgraph.core.exceptions import StorageError

            try:
                existed = await cp.aclean_thread(cfg)
            except StorageError as exc:
                if exc.error_code == "STORAGE_FORBIDDEN_001":
                    return _not_found(args)
                raise
            if not existed:
                return _not_found(args)
            if args.json:
                _print_json({"deleted": args.thread_id, "user_id": user})
            else:
                print(f"deleted thread {args.thread_id!r} (every version, message and ledger row)")
            return EXIT_OK
        raise CliError(f"unknown action {args.action!r}", 2)
    finally:
        await cp.aclose()
