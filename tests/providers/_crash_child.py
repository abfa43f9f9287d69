"""Child process of the provider crash test: ``python _crash_child.py PROVIDER URL DB MARKER``.

Runs thread ``t`` of :func:`build` (``"pay 5"``) on a ``SqliteCheckpointer`` at ``DB``; the
tool ``charge`` ends the process with ``os._exit(3)`` while the file ``MARKER`` exists, after
the model's tool-call answer was checkpointed.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END

MODELS = {"google": "gemini-2.5-flash", "anthropic": "claude-sonnet-4-5", "openai": "gpt-4o-mini"}


def build(provider: str, url: str, checkpointer: Any, marker: str) -> Any:
    """MAIN (Agent of ``provider`` at ``url``) -> TOOL (charge) -> MAIN -> END."""

    def charge(amount: int) -> str:
        """Charge the card."""
        if os.path.exists(marker):
            os._exit(3)
        return f"charged {amount}"

    g = StateGraph()
    g.add_node(
        "MAIN",
        Agent(
            model=MODELS[provider], provider=provider, base_url=url, api_key="k", tool_node="TOOL"
        ),
    )
    g.add_node("TOOL", ToolNode([charge]))
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=checkpointer)


async def main() -> None:
    provider, url, db, marker = sys.argv[1:5]
    app = build(provider, url, SqliteCheckpointer(db), marker)
    await app.ainvoke({"messages": ["pay 5"]}, {"thread_id": "t"})


if __name__ == "__main__":
    anyio.run(main)
