"""A server loop that retries on StaleStateError: two instances answer the same thread at once.

Run: python examples/concurrent_retry.py   (no server needed; embedded SQLite)

Two "application instances" (two compiled graphs on one SQLite file, as two processes behind a
load balancer would be) receive a message for the same thread at the same moment. Both read
version v; the first to write wins; the other gets StaleStateError (STORAGE_CONFLICT_000) and
nothing of its attempt is stored. The handler simply calls again: the next read sees the
winner's state, and no update is lost. The version each turn was stored as is read back with
the public history API (``aget_state_history``).
"""

from __future__ import annotations

import asyncio
import os
import random
import tempfile

from tenxgraph.core.exceptions import StaleStateError, TransientStorageError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END


async def slow_assistant(state: AgentState) -> str:
    """Takes a little while, like a model call, so that two requests overlap."""
    await asyncio.sleep(0.05)
    return f"noted: {state.context[-1].text()}"


def build(db: str):
    graph = StateGraph()
    graph.add_node("MAIN", slow_assistant)
    graph.add_edge("MAIN", END)
    graph.set_entry_point("MAIN")
    return graph.compile(checkpointer=SqliteCheckpointer(db))


async def stored_version(app, config: dict, reply: str) -> int:
    """The first kept version whose messages hold ``reply`` (the version this turn wrote).

    The other instance may have written after us already, so the latest version is not
    necessarily ours: look through the most recent versions, newest first.
    """
    history = await app.aget_state_history(config, limit=10)
    ours = [snap.version for snap in history if any(m.text() == reply for m in snap.state.context)]
    if not ours:
        raise LookupError(f"{reply!r} is not in the last 10 versions of {config['thread_id']!r}")
    return min(ours)


async def handle(app, instance: str, thread_id: str, text: str, message_id: str) -> int:
    """The request handler: run the turn, retry on conflict. Returns the retries needed."""
    retries = 0
    while True:
        config = {"thread_id": thread_id, "user_id": "customer-7"}
        try:
            # A stable message_id makes the retry idempotent: the message is never duplicated.
            await app.ainvoke(
                {"messages": [Message.text_message(text, message_id=message_id)]}, config
            )
            version = await stored_version(app, config, f"noted: {text}")
            print(f"  {instance}: stored {text!r} as version {version} after {retries} retries")
            return retries
        except (StaleStateError, TransientStorageError) as exc:
            retries += 1
            print(
                f"  {instance}: {exc.error_code} (expected version {exc.context.get('expected_version')}, "
                f"current {exc.context.get('current_version')}); retrying"
            )
            await asyncio.sleep(random.uniform(0.001, 0.02))


async def main() -> None:
    db = os.path.join(tempfile.mkdtemp(prefix="tenxgraph-retry-"), "retry.sqlite")
    a, b = build(db), build(db)
    thread = "order-1234"
    conflicts = 0
    for i in range(3):
        print(f"round {i + 1}: two messages arrive at once")
        results = await asyncio.gather(
            handle(a, "instance A", thread, f"message A{i}", f"a-{i}"),
            handle(b, "instance B", thread, f"message B{i}", f"b-{i}"),
        )
        conflicts += sum(results)
    state = await a.aget_state({"thread_id": thread, "user_id": "customer-7"})
    users = [m.text() for m in state.context if m.role == "user"]
    print(f"{len(users)} user messages stored, none lost: {users}; conflicts retried: {conflicts}")
    assert sorted(users) == sorted([f"message {x}{i}" for i in range(3) for x in "AB"])
    await a.aclose()
    await b.aclose()


if __name__ == "__main__":
    asyncio.run(main())
