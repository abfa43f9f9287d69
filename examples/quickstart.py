"""Quickstart: one graph, two users, isolated threads, on the embedded SQLite store.

Run: python examples/quickstart.py   (no server needed)

Alice and Bob each talk to the assistant in their own thread. Bob cannot read Alice's thread
(it reads exactly as if it did not exist) and cannot write to it (StorageError
STORAGE_FORBIDDEN_001), even if he guesses its id.
"""

from __future__ import annotations

import os
import tempfile

from tenxgraph.core.exceptions import StorageError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END


def assistant(state: AgentState) -> str:
    """Answer the last user message (a stand-in for a chat model)."""
    last = state.context[-1].text()
    turns = sum(1 for m in state.context if m.role == "user")
    return f"You said {last!r} (message {turns} of this conversation)."


def main() -> None:
    folder = tempfile.mkdtemp(prefix="tenxgraph-quickstart-")
    checkpointer = SqliteCheckpointer(os.path.join(folder, "quickstart.sqlite"))
    graph = StateGraph()
    graph.add_node("MAIN", assistant)
    graph.add_edge("MAIN", END)
    graph.set_entry_point("MAIN")
    app = graph.compile(checkpointer=checkpointer)

    alice = {"thread_id": "support-1", "user_id": "alice"}
    bob = {"thread_id": "support-2", "user_id": "bob"}
    for text in ("Hello, I'm Alice.", "What did I say first?"):
        out = app.invoke({"messages": [Message.text_message(text)]}, dict(alice))
        print("alice ->", out["messages"][-1].text())
    out = app.invoke({"messages": [Message.text_message("Hi, Bob here.")]}, dict(bob))
    print("bob   ->", out["messages"][-1].text())

    # Bob guesses Alice's thread id: he reads nothing ...
    snooping = {"thread_id": "support-1", "user_id": "bob"}
    assert app.get_state(dict(snooping)) is None
    print("bob reading alice's thread -> None (as if it did not exist)")
    # ... and cannot write to it.
    try:
        app.invoke({"messages": [Message.text_message("let me in")]}, dict(snooping))
    except StorageError as exc:
        print("bob writing to alice's thread ->", exc.error_code)
        assert exc.error_code == "STORAGE_FORBIDDEN_001"
    else:  # pragma: no cover - isolation broken
        raise SystemExit("isolation broken: bob wrote to alice's thread")

    state = app.get_state(dict(alice))
    print(
        f"alice's thread: {len(state.context)} messages;",
        "threads of alice:",
        [t.thread_id for t in checkpointer.list_threads({"user_id": "alice"})],
    )
    checkpointer.close()


if __name__ == "__main__":
    main()
