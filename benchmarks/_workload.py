"""The workload every contender runs: one graph, built for tenxgraph and for LangGraph.

The graph is a two-node loop ``A -> B -> A -> ...`` with no model: each node is a plain
function that appends ONE assistant message of about 200 characters and routes on the last
message. A run (one ``invoke``) starts with one user message carrying ``left = K`` in its
metadata; every node appends a message with ``left - 1``; the router after each node goes to
the other node while ``left > 0`` and to ``END`` otherwise. A run therefore executes exactly
:data:`STEPS_PER_RUN` nodes (steps) and adds ``K + 1`` messages to the thread.

The state holds only the messages (tenxgraph: ``AgentState.context``; LangGraph: a
``messages`` channel with ``add_messages``), so no contender pays for a counter field the other
does not have. Message texts are pseudo-natural prose (words drawn from a fixed vocabulary with
a fixed seed), so Postgres' TOAST compression sees text as compressible as real conversation,
not 200 copies of one letter.

A thread "with N messages of history" is prepared through the public API of each runtime: one
run whose input is ``N - 1`` messages (the last with ``left = 0``), so node A appends one
message and the run ends. Preparation is never timed.
"""

from __future__ import annotations

import itertools
import random
from typing import Annotated, Any

#: Nodes executed per run (per ``invoke``); every measured figure is per node execution.
STEPS_PER_RUN = 10
#: Characters of each message's text (approximately; words are not cut).
MESSAGE_CHARS = 200

_WORDS = (
    "the a an of to and in is it that for on with as was be by at this from or have not are "
    "your booking flight seat change cancel refund baggage passenger reservation policy agent "
    "customer request confirm number details ticket economy business upgrade payment card "
    "certificate travel date return origin destination airport delay compensation membership "
    "gold silver regular insurance total price available option please thank you could would "
    "should need want help check update account order item delivery address exchange return "
    "product status tracking warranty issue problem resolve let me see here is what I found"
).split()


def _texts(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        words: list[str] = []
        size = 0
        while size < MESSAGE_CHARS:
            w = rnd.choice(_WORDS)
            words.append(w)
            size += len(w) + 1
        out.append(" ".join(words)[:MESSAGE_CHARS])
    return out


#: A pool of distinct message texts, reused round robin.
TEXTS: list[str] = _texts(4096, seed=10)
_counter = itertools.count()


def next_text() -> str:
    """The next text of the pool (cheap: no generation on the hot path)."""
    return TEXTS[next(_counter) % len(TEXTS)]


# -- tenxgraph --------------------------------------------------------------------------------------
# The same code runs the real 10xGraph in a second environment (``_real10x.py``): messages are
# built with an explicit ``TextBlock``, since 10xGraph does not turn a ``str`` into one.
def tx_message(role: str, left: int) -> Any:
    """A message of the next text with ``left`` in its metadata (tenxgraph or 10xGraph)."""
    from tenxgraph.core.state import Message
    from tenxgraph.core.state.message_block import TextBlock

    return Message(role=role, content=[TextBlock(text=next_text())], metadata={"left": left})


def tx_input(left: int = STEPS_PER_RUN) -> dict[str, Any]:
    """The input of one tenxgraph run: one user message with ``left`` in its metadata."""
    return {"messages": [tx_message("user", left)]}


def tx_history_input(n: int) -> dict[str, Any]:
    """Input that leaves a fresh thread holding exactly ``n`` messages after one run."""
    msgs = []
    for i in range(n - 1):
        msgs.append(tx_message("user" if i % 2 == 0 else "assistant", 0))
    return {"messages": msgs}


def build_tx_graph(checkpointer: Any, *, sync_nodes: bool = False) -> Any:
    """The benchmark graph on tenxgraph, compiled with ``checkpointer``.

    Args:
        checkpointer: an ``InMemoryCheckpointer``, ``SqliteCheckpointer`` or ``PgCheckpointer``.
        sync_nodes: use ``def`` nodes (tenxgraph runs them in a worker thread) instead of
            ``async def`` nodes (run on the event loop).
    """
    from tenxgraph.core.graph import StateGraph
    from tenxgraph.utils import END

    async def step(state):  # noqa: ANN001, ANN202 - a plain node
        return tx_message("assistant", state.context[-1].metadata["left"] - 1)

    def step_sync(state):  # noqa: ANN001, ANN202
        return tx_message("assistant", state.context[-1].metadata["left"] - 1)

    def route(state):  # noqa: ANN001, ANN202
        return "more" if state.context[-1].metadata["left"] > 0 else "done"

    node = step_sync if sync_nodes else step
    g = StateGraph()
    g.add_node("A", node)
    g.add_node("B", node)
    g.set_entry_point("A")
    g.add_conditional_edges("A", route, {"more": "B", "done": END})
    g.add_conditional_edges("B", route, {"more": "A", "done": END})
    return g.compile(checkpointer=checkpointer)


# -- LangGraph ----------------------------------------------------------------------------------
def lg_input(left: int = STEPS_PER_RUN) -> dict[str, Any]:
    """The input of one LangGraph run: one user message with ``left`` in ``additional_kwargs``."""
    from langchain_core.messages import HumanMessage

    return {"messages": [HumanMessage(content=next_text(), additional_kwargs={"left": left})]}


def lg_history_input(n: int) -> dict[str, Any]:
    """Input that leaves a fresh LangGraph thread holding exactly ``n`` messages."""
    from langchain_core.messages import AIMessage, HumanMessage

    msgs = []
    for i in range(n - 1):
        cls = HumanMessage if i % 2 == 0 else AIMessage
        msgs.append(cls(content=next_text(), additional_kwargs={"left": 0}))
    return {"messages": msgs}


def build_lg_graph(checkpointer: Any) -> Any:
    """The same graph on LangGraph (``StateGraph`` with an ``add_messages`` channel)."""
    from typing import TypedDict

    from langchain_core.messages import AIMessage, AnyMessage
    from langgraph.graph import END, StateGraph
    from langgraph.graph.message import add_messages

    # Functional TypedDict syntax: this module uses postponed annotations, which LangGraph
    # could not resolve for a class defined inside a function.
    State = TypedDict("State", {"messages": Annotated[list[AnyMessage], add_messages]})  # noqa: UP013

    def step(state):  # noqa: ANN001, ANN202 - no hints: postponed annotations (see above)
        left = state["messages"][-1].additional_kwargs["left"] - 1
        return {"messages": [AIMessage(content=next_text(), additional_kwargs={"left": left})]}

    def route(state):  # noqa: ANN001, ANN202
        return "more" if state["messages"][-1].additional_kwargs["left"] > 0 else "done"

    g = StateGraph(State)
    g.add_node("A", step)
    g.add_node("B", step)
    g.set_entry_point("A")
    g.add_conditional_edges("A", route, {"more": "B", "done": END})
    g.add_conditional_edges("B", route, {"more": "A", "done": END})
    return g.compile(checkpointer=checkpointer)
