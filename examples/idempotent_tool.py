"""A tool with an idempotency key: the ``tool_call_id`` the ToolNode injects.

Run: python examples/idempotent_tool.py   (no server needed; in-memory store)

The ledger makes a replayed node return a recorded tool result instead of calling the tool
again. One window remains: the tool has done its side effect but the process dies before the
result is recorded. A tool whose side effect goes to another system closes that window by
passing the call's id as an idempotency key (Stripe, most payment and messaging APIs accept
one). Here the "payment provider" is a dict keyed by that id. A tool parameter named
``tool_call_id`` receives the call's id (it is not part of the schema the model sees).
"""

from __future__ import annotations

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import Message
from tenxgraph.models import ScriptedModel
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END

#: The payment provider's records: idempotency key -> charge. A real provider keeps these.
PROVIDER: dict[str, dict] = {}
CHARGE_REQUESTS = 0


def charge_card(customer: str, amount_cents: int, tool_call_id: str) -> dict:
    """Charge a customer's card.

    Args:
        customer: the customer id.
        amount_cents: the amount, in cents.
        tool_call_id: injected by the ToolNode: the id of this call, the same on every retry.
    """
    global CHARGE_REQUESTS
    CHARGE_REQUESTS += 1
    key = tool_call_id  # the same on every retry of this call
    if key not in PROVIDER:  # the provider applies a key once
        PROVIDER[key] = {
            "customer": customer,
            "amount_cents": amount_cents,
            "charge_id": f"ch_{len(PROVIDER) + 1}",
        }
    return PROVIDER[key]


def route(state) -> str:
    return "TOOL" if state.context[-1].tool_calls() else END


def main() -> None:
    model = ScriptedModel(
        [
            {
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_pay_1",
                        "name": "charge_card",
                        "arguments": {"customer": "cus_42", "amount_cents": 1999},
                    }
                ],
            },
            "Done: you were charged $19.99.",
        ]
    )
    graph = StateGraph()
    graph.add_node("MAIN", Agent(model=model, tool_node="TOOL"))
    graph.add_node("TOOL", ToolNode([charge_card]))
    graph.add_conditional_edges("MAIN", route, {"TOOL": "TOOL", END: END})
    graph.add_edge("TOOL", "MAIN")
    graph.set_entry_point("MAIN")
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "checkout-1", "user_id": "cus_42"}
    out = app.invoke({"messages": [Message.text_message("Please pay my order.")]}, dict(config))
    print("agent:", out["messages"][-1].text())

    # The crash window, simulated: the same call executed again (as after a process died
    # between the charge and the ledger write) reaches the provider with the same key.
    again = charge_card("cus_42", 1999, tool_call_id="call_pay_1")
    print(
        f"charge requests: {CHARGE_REQUESTS}, charges applied by the provider: {len(PROVIDER)} ({again['charge_id']})"
    )
    assert CHARGE_REQUESTS == 2 and len(PROVIDER) == 1


if __name__ == "__main__":
    main()
