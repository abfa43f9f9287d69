"""Dynamic interrupts: pause a run inside a node until a human answers.

``interrupt()`` called inside a node (or a tool) pauses the run with a payload; the pause is a
durable checkpoint (status ``interrupted``) that any instance can resume, days later, with
``invoke({"resume": answer}, config)``. The node then runs again from its start and the same
``interrupt()`` call returns ``answer`` (the model follows LangGraph's ``interrupt``: code
before the call re-runs, so keep side effects after it, or in tools, whose results the ledger
keeps).

Each ``interrupt()`` call of a node execution gets a distinct, deterministic id
(``"<node>:<step>:<n>"``, the n-th call of that execution; inside a tool
``"<node>:<step>:<tool_call_id>:<n>"``, since parallel tools interrupt in any order). Several interrupts raised in one
step (e.g. parallel tools) are all pending at once; answer them together with
``{"resume": {id1: a1, id2: a2}}`` or one by one. A plain (non-dict) ``resume`` value answers
the first pending interrupt.
"""

from __future__ import annotations

from typing import Any

from tenxgraph.core._context import current_run, current_tool_call
from tenxgraph.core.exceptions import GraphError

__all__ = ["interrupt", "pending_interrupt", "pending_interrupts"]


def interrupt(
    value: Any = None,
    *,
    message: str | None = None,
    reason: str = "human_input",
    response_schema: dict[str, Any] | None = None,
) -> Any:
    """Pause the run for a human, or return the human's answer when resumed.

    Args:
        value: JSON-compatible data shown to the human (the question, a draft to approve...).
        message: a short human-readable prompt.
        reason: why the run pauses (stored in ``execution_meta.interrupt_reason``).
        response_schema: optional JSON schema the answer should follow (informational).

    Returns:
        The answer given with ``invoke({"resume": answer}, config)``.

    Raises:
        GraphError: ``GRAPH_000`` when called outside a running node.
    """
    from tenxgraph.core._runner import GraphInterrupt

    run = current_run()
    if run is None:
        raise GraphError("interrupt() can only be called inside a running node", context={})
    call = current_tool_call()
    if call is not None:
        # Parallel tools interrupt in a timing-dependent order: key the id by the call.
        call.interrupt_seq += 1
        iid = f"{run.node}:{run.step}:{call.tool_call_id}:{call.interrupt_seq}"
    else:
        run.interrupt_seq += 1
        iid = f"{run.node}:{run.step}:{run.interrupt_seq}"
    answers = run.answers
    if iid in answers:
        return answers[iid]
    raise GraphInterrupt(
        {
            "id": iid,
            "node": run.node,
            "value": value,
            "message": message,
            "reason": reason,
            "response_schema": response_schema,
        }
    )


def pending_interrupts(state: Any) -> list[dict[str, Any]]:
    """The interrupts a paused run waits on (each ``{"id", "node", "value", "message",
    "reason", "response_schema"}``), oldest first; empty when not paused by ``interrupt()``.

    Args:
        state: a state object (``get_state``), or the dict ``invoke`` returned.
    """
    if isinstance(state, dict):
        if state.get("state") is not None:
            return pending_interrupts(state["state"])
        data = (state.get("interrupt") or {}).get("data") or {}
        return list(data.get("interrupts", []))
    meta = getattr(state, "execution_meta", None)
    data = getattr(meta, "interrupt_data", None) or {}
    return list(data.get("interrupts", []))


def pending_interrupt(state: Any) -> dict[str, Any] | None:
    """The first pending interrupt of a paused state (or ``invoke`` result dict), or ``None``."""
    items = pending_interrupts(state)
    return items[0] if items else None
