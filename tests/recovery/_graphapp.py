"""The graph run by the recovery tests' worker processes (``tenxgraph worker --graph
_graphapp:app``), configured by environment variables:

* ``RECOVERY_STORE``: ``sqlite:PATH``, ``pg:DSN|SCHEMA`` or ``pgredis:DSN|SCHEMA|REDIS_URL|PREFIX``
  (lease TTL 1 s, renewed every 0.25 s);
* ``RECOVERY_EVENTS``: every node and tool execution appends ``"<kind> <name> <thread> <pid>"``;
* ``RECOVERY_EFFECTS``: the tool's side effect, one ``"<tool_call_id> <pid> <unix time>"`` line
  per execution;
* ``RECOVERY_HANG``: ``plan`` (inside a node) or ``tool`` (inside the second tool call): the first
  execution of each thread at that point logs ``hang`` and sleeps 60 s (the test SIGKILLs it);
  ``crash``: every execution of ``plan`` kills its own process (a poison run); ``slowtool``: the
  first execution of the first tool call of each thread logs ``hang`` and takes 2 s;
* ``RECOVERY_POISON``: a thread id whose ``plan`` ends its own process (``os._exit``) every
  time, while the other threads run normally;
* ``RECOVERY_NODE_S``: seconds ``plan`` waits (a model call stand-in; default 0).

``plan -> tools -> answer -> END``: ``plan`` asks for two tool calls (``<thread>:a``,
``<thread>:b``), ``tools`` runs them through the ledger, ``answer`` answers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

from tenxgraph.core.graph import StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message
from tenxgraph.models import assistant_message
from tenxgraph.utils import END

LEASE = {"lease_ttl_s": 1.0, "lease_renew_s": 0.25}


def checkpointer_from(spec: str) -> Any:
    """The checkpointer a ``RECOVERY_STORE`` value names."""
    kind, _, rest = spec.partition(":")
    if kind == "sqlite":
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        return SqliteCheckpointer(rest, **LEASE)
    from tenxgraph.storage.checkpointer import PgCheckpointer

    parts = rest.split("|")
    if kind == "pg":
        return PgCheckpointer(postgres_dsn=parts[0], schema=parts[1], **LEASE)
    return PgCheckpointer(
        postgres_dsn=parts[0], schema=parts[1], redis_url=parts[2], redis_prefix=parts[3], **LEASE
    )


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()


def _event(kind: str, name: str, thread: str) -> None:
    _append(os.environ["RECOVERY_EVENTS"], f"{kind} {name} {thread} {os.getpid()}")


def _hang_here(point: str, thread: str) -> bool:
    """Whether this is the first execution of ``point`` for ``thread`` under RECOVERY_HANG."""
    if os.environ.get("RECOVERY_HANG") != point:
        return False
    marker = f"{os.environ['RECOVERY_EVENTS']}.{point}.{thread.replace('/', '_')}"
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    _event("hang", point, thread)
    return True


async def plan(state: AgentState, config: dict[str, Any]) -> Message:
    tid = str(config["thread_id"])
    _event("node", "plan", tid)
    if os.environ.get("RECOVERY_HANG") == "crash":
        _event("hang", "crash", tid)
        os.kill(os.getpid(), signal.SIGKILL)
    if tid == os.environ.get("RECOVERY_POISON"):
        _event("hang", "poison", tid)
        os._exit(70)  # this run kills its worker, whatever else is in flight there
    if _hang_here("plan", tid):
        await asyncio.sleep(60)
    await asyncio.sleep(float(os.environ.get("RECOVERY_NODE_S", "0")))
    calls = [
        {"id": f"{tid}:a", "name": "effect", "arguments": {"tag": "a"}},
        {"id": f"{tid}:b", "name": "effect", "arguments": {"tag": "b"}},
    ]
    return assistant_message("", calls)


def effect(tag: str, tool_call_id: str) -> str:
    """Write the side effect of one tool call.

    Args:
        tag: which call.
    """
    thread = tool_call_id.rsplit(":", 1)[0]
    _event("tool", tag, thread)
    if tag == "b" and _hang_here("tool", thread):
        time.sleep(60)
    if tag == "a" and _hang_here("slowtool", thread):
        time.sleep(2)  # the worker is sent SIGTERM meanwhile: its effect must still count once
    _append(os.environ["RECOVERY_EFFECTS"], f"{tool_call_id} {os.getpid()} {time.time():.6f}")
    return f"did {tag}"


async def answer(state: AgentState, config: dict[str, Any]) -> str:
    tid = str(config["thread_id"])
    _event("node", "answer", tid)
    return f"answered {tid}"


def build(checkpointer: Any) -> Any:
    """The compiled graph on ``checkpointer``."""
    g = StateGraph()
    g.add_node("plan", plan)
    g.add_node("tools", ToolNode([effect]))
    g.add_node("answer", answer)
    g.set_entry_point("plan")
    g.add_edge("plan", "tools")
    g.add_edge("tools", "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=checkpointer)


def app() -> Any:
    """The graph the worker loads (``--graph _graphapp:app``)."""
    return build(checkpointer_from(os.environ["RECOVERY_STORE"]))
