"""``tenxgraph setup`` and ``tenxgraph threads``: schema setup and thread inspection.

``setup`` is the only command that writes DDL. The ``threads`` commands check that the tables
exist (never creating or migrating them) and see one user's threads, as the application does,
unless ``--all-users`` asks for the admin scope
(``tenxgraph.storage.checkpointer.ADMIN_SCOPE``).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from typing import Any

from tenxgraph.cli._common import (
    DEFAULT_TIMEOUT_S,
    EXIT_DAMAGED,
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_PERMISSION,
    EXIT_UNREACHABLE,
    CliError,
    StoreSpec,
    _open,
    _store_spec,
    one_line,
)
from tenxgraph.cli._text import fit, pad, safe, width


def _spec(args: argparse.Namespace) -> StoreSpec:
    spec = _store_spec(args)
    spec.timeout_s = args.timeout if args.timeout is not None else DEFAULT_TIMEOUT_S
    return spec


async def _check_redis(spec: StoreSpec, before: str = "") -> None:
    """Ping the Redis of ``--redis-url`` (when given with ``--dsn``) once.

    The library treats an unreachable Redis as a cache miss; a command an operator typed a
    Redis URL into says instead that the URL does not work.

    Raises:
        CliError: exit 4 when Redis refuses the credentials, 3 when it cannot be reached.
    """
    if not (spec.dsn and spec.redis_url):
        return
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(spec.redis_url, socket_connect_timeout=5)
    try:
        await client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        from tenxgraph.core.exceptions import redact
        from tenxgraph.storage.redis import auth_error

        refused = auth_error(exc, redact(spec.redis_url, spec.secrets()))
        if refused is not None:
            raise CliError(
                f"{before}{one_line(refused, spec.secrets())}", EXIT_PERMISSION
            ) from None
        raise CliError(
            f"{before}Redis is not reachable: {one_line(exc, spec.secrets())}",
            EXIT_UNREACHABLE,
        ) from None
    finally:
        await client.aclose()


async def _cmd_setup(args: argparse.Namespace) -> int:
    spec = _spec(args)
    cp = await _open(spec)
    await cp.aclose()
    await _check_redis(spec, "schema ready on Postgres, but ")
    print(f"schema ready: {spec.describe()}")
    return EXIT_OK


def _short(text: str, width: int) -> str:
    """Prose on one line (whitespace runs collapsed), control characters escaped, cut to
    ``width`` terminal columns."""
    return fit(" ".join(text.split()), max(width, 2))


def _fmt_time(ts: float | None, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    if not ts:
        return "-"
    return time.strftime(fmt, time.localtime(ts))


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


#: Columns of the "updated" field: full, compact (month-day hour:minute), dropped.
_UPDATED = ((19, "%Y-%m-%d %H:%M:%S"), (11, "%m-%d %H:%M"), (0, ""))


def _list_table(threads: list[Any], all_users: bool) -> None:
    """Print ``threads`` as a table that fits the terminal: ids and owners are shown with
    control characters escaped and measured in terminal columns (wide characters count 2);
    when the terminal is narrow the owner column shrinks, then the time gets compact, then the
    status column narrows, then the time is dropped; long ids end with an ellipsis."""
    cols = _columns()
    ids = [safe(t.thread_id) for t in threads]
    id_natural = max([len("thread_id"), *(width(i) for i in ids)])
    version_w = max([len("version"), *(len(str(t.version)) for t in threads)])
    owner_natural = (
        min(max([len("owner"), *(width(safe(t.user_id)) for t in threads)]), 16) if all_users else 0
    )
    owner_w, status_w, updated = owner_natural, 10, 0

    def fixed() -> int:
        time_w = _UPDATED[updated][0]
        owner = owner_w + 1 if all_users else 0
        return owner + version_w + 2 + status_w + (time_w + 1 if time_w else 0) + 1

    want = min(id_natural, 12)
    while cols - fixed() < want:
        if all_users and owner_w > len("owner"):
            owner_w = max(len("owner"), owner_w - (fixed() + want - cols))
        elif updated < 1:
            updated = 1
        elif status_w > 6:
            status_w = 6
        elif updated < 2:
            updated = 2
        else:
            break
    id_w = max(4, min(id_natural, cols - fixed()))
    time_w, time_fmt = _UPDATED[updated]

    def row(tid: str, owner: str, version: str, status: str, when: str) -> str:
        cells = [pad(tid, id_w)]
        if all_users:
            cells.append(pad(owner, owner_w))
        cells.append(pad(version, version_w, right=True) + " ")
        cells.append(pad(status, status_w))
        if time_w:
            cells.append(fit(when, time_w))
        return " ".join(cells).rstrip()

    print(row("thread_id", "owner", "version", "status", "updated"))
    for t in threads:
        print(
            row(
                t.thread_id,
                t.user_id,
                str(t.version),
                " ".join(str(t.status).split()),
                _fmt_time(t.updated_at, time_fmt),
            )
        )


class _SkippedRows(logging.Handler):
    """Collects, while active, the storage layer's one-line reports of rows a list operation
    left out as undecodable (logger ``tenxgraph.storage``), so the CLI can say so on stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "cannot be decoded" in record.getMessage():
            self.messages.append(record.getMessage())

    def __enter__(self) -> _SkippedRows:
        logging.getLogger("tenxgraph.storage").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("tenxgraph.storage").removeHandler(self)


def _origin_note(origin: dict[str, Any] | None) -> str:
    """What a history row adds for a version written by a rewind or a fork."""
    if not origin:
        return ""
    if origin.get("op") == "fork":
        return f"  (fork of {safe(str(origin.get('thread_id')))} v{origin.get('version')})"
    return f"  (rewind to v{origin.get('version')})"


def _history_table(snaps: list[Any]) -> None:
    """Print a thread's versions as a table that fits the terminal (narrower status and node
    columns, then a compact time, then no time on narrow terminals)."""
    cols = _columns()
    for status_w, node_w, updated in ((10, 12, 0), (10, 12, 1), (6, 8, 1), (6, 8, 2)):
        time_w = _UPDATED[updated][0]
        if 7 + 2 + status_w + 1 + node_w + 1 + 8 + (2 + time_w if time_w else 0) <= cols:
            break
    time_fmt = _UPDATED[updated][1]

    def row(version: str, status: str, node: str, messages: str, when: str) -> str:
        cells = [
            pad(version, 7, right=True) + " ",
            pad(" ".join(status.split()), status_w),
            pad(" ".join(node.split()), node_w),
            pad(messages, 8, right=True) + " ",
        ]
        if time_w:
            cells.append(fit(when, time_w))
        return " ".join(cells).rstrip()

    print(row("version", "status", "next node", "messages", "created"))
    for snap in snaps:
        print(
            row(
                str(snap.version),
                str(snap.status),
                str(snap.next_node or "-"),
                str(len(snap.state.context)),
                _fmt_time(snap.created_at, time_fmt),
            )
            + _origin_note(snap.origin)
        )


async def _travel(cp: Any, args: argparse.Namespace, cfg: dict[str, Any], user: str) -> int:
    """``threads rewind`` / ``threads fork`` (docs/how-to/time-travel.md): refused without
    ``--yes``; a version that is not kept exits 1 naming the oldest kept one, a fork target
    that exists (or a rewind that lost to a concurrent writer) exits 1 too; a fork into its
    own source thread is a usage error (exit 2), as is a version above ``2**63 - 1`` (refused
    by the argument parser). The write prunes
    no version."""
    from tenxgraph.core.exceptions import StorageError, ValidationError

    if not args.yes:
        raise CliError(f"refusing to {args.action} without --yes", 2)
    # The command does not know the application's state_history_limit: its write prunes
    # nothing (the application's next checkpoint prunes to its own limit).
    cp.state_history_limit = None
    try:
        if args.action == "rewind":
            loaded = await cp.arewind(cfg, args.version)
            done = {"thread_id": args.thread_id, "rewound_to": args.version}
        else:
            fork_cfg = await cp.afork(cfg, args.version, args.to)
            loaded = await cp.aload_version(fork_cfg, 1)
            done = {"thread_id": args.to, "forked_from": {"thread_id": args.thread_id}}
            done["forked_from"]["version"] = args.version
    except ValidationError as exc:  # a fork into its own source thread
        raise CliError(exc.message, 2) from None
    except StorageError as exc:
        if exc.error_code == "STORAGE_FORBIDDEN_001" and args.action == "rewind":
            return _not_found(args)  # another user's thread, as delete reports it
        if exc.error_code in (
            "STORAGE_NOT_FOUND_000",
            "STORAGE_CONFLICT_000",
            "STORAGE_FORBIDDEN_001",  # a fork's target owned by another user
        ):
            raise CliError(exc.message, EXIT_MISMATCH) from None
        raise
    done.update(user_id=user, version=loaded.version, messages=len(loaded.state.context))
    if args.json:
        _print_json(done)
    elif args.action == "rewind":
        print(
            f"thread {safe(args.thread_id)}: version {loaded.version} written, equal to "
            f"version {args.version} ({done['messages']} messages)"
        )
    else:
        print(
            f"thread {safe(args.to)} created from version {args.version} of "
            f"{safe(args.thread_id)} ({done['messages']} messages)"
        )
    return EXIT_OK


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
    await _check_redis(spec)
    cp = await _open(spec, read_only=True)
    try:
        if args.action == "list":
            scope = ADMIN_SCOPE if args.all_users else args.user
            threads = await cp.alist_threads(
                {"user_id": scope}, search=args.search, limit=args.limit
            )
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
                fit(
                    f"thread {safe(args.thread_id)}  version {version}  status {meta.status}  "
                    f"next/last node {safe(str(meta.current_node))}  steps {meta.step}",
                    _columns(),
                )
            )
            width = args.width if args.width is not None else _columns() - 15
            for i, m in enumerate(state.context):
                print(f"{i:>4} {m.role:<9} {_describe_message(m, width)}")
            return EXIT_OK
        if args.action == "history":
            with _SkippedRows() as skipped:
                snaps = await cp.aget_state_history(cfg, limit=args.limit)
            if skipped.messages and not snaps:
                raise CliError(
                    f"stored data damaged: every readable version of thread "
                    f"{safe(args.thread_id)} was left out ({skipped.messages[0]})",
                    EXIT_DAMAGED,
                )
            for message in skipped.messages:
                print(f"warning: {message}", file=sys.stderr)
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
                            "origin": s.origin,
                        }
                        for s in snaps
                    ]
                )
                return EXIT_OK
            _history_table(snaps)
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
        if args.action in ("rewind", "fork"):
            return await _travel(cp, args, cfg, user)
        raise CliError(f"unknown action {args.action!r}", 2)
    finally:
        await cp.aclose()
