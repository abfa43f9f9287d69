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

from dataclasses import asdict, dataclass
from typing import Any

from tenxgraph.core._context import current_run, current_tool_call
from tenxgraph.core.exceptions import GraphError

__all__ = ["GraphInterrupt", "Interrupt", "interrupt", "pending_interrupt", "pending_interrupts"]


@dataclass(frozen=True, slots=True)
class Interrupt:
    """One pending question of a run paused by ``interrupt()``.

    Attributes:
        id: deterministic id (``"<node>:<step>:<n>"``, inside a tool
            ``"<node>:<step>:<tool_call_id>:<n>"``); key of an answer in ``{"resume": {id: ...}}``.
        value: the JSON-compatible data passed to ``interrupt()`` (the question, a draft...).
        node: the node that paused.
        tool_call_id: the tool call that paused, when ``interrupt()`` ran inside a tool, else
            ``None``.
        message: the short prompt passed as ``message=``, or ``None``.
        reason: why the run paused (``"human_input"`` unless given).
        response_schema: the JSON schema passed as ``response_schema=``, or ``None``.
    """

    id: str
    value: Any = None
    node: str | None = None
    tool_call_id: str | None = None
    message: str | None = None
    reason: str = "human_input"
    response_schema: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Interrupt:
        """Rebuild an interrupt from its stored form (unknown keys are ignored: a newer
        version may store more)."""
        return cls(
            id=str(data["id"]),
            value=data.get("value"),
            node=data.get("node"),
            tool_call_id=data.get("tool_call_id"),
            message=data.get("message"),
            reason=data.get("reason") or "human_input",
            response_schema=data.get("response_schema"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-compatible dict stored in ``execution_meta.interrupt_data``."""
        return asdict(self)

    def __getitem__(self, key: str) -> Any:
        """Dict-style read (``p["id"]``), for code written against the earlier dict form.

        Raises:
            KeyError: for a name that is not a field.
        """
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)


class GraphInterrupt(BaseException):  # noqa: N818 - 10xGraph / LangGraph name; control flow
    """Raised inside a node by ``interrupt()`` to pause the run for a human.

    A ``BaseException`` so a node's ``except Exception`` cannot swallow the pause; the runtime
    catches it, checkpoints the pause and ends the run. User code never needs to raise it.

    Attributes:
        interrupts: the pending questions (a tuple of ``Interrupt``; one for a single call).
    """

    def __init__(self, *interrupts: Interrupt) -> None:
        super().__init__("interrupt")
        self.interrupts: tuple[Interrupt, ...] = interrupts

    @property
    def payload(self) -> dict[str, Any]:
        """The stored form of the first interrupt."""
        return self.interrupts[0].to_dict()


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
        GraphInterrupt: to pause the run (caught by the runtime; do not catch it).
    """
    run = current_run()
    if run is None:
        raise GraphError("interrupt() can only be called inside a running node", context={})
    call = current_tool_call()
    tool_call_id = call.tool_call_id if call is not None else None
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
        Interrupt(
            id=iid,
            value=value,
            node=run.node,
            tool_call_id=tool_call_id,
            message=message,
            reason=reason,
            response_schema=response_schema,
        )
    )


def pending_interrupts(state: Any) -> list[Interrupt]:
    """The interrupts a paused run waits on, in id order; empty when the run is not paused by
    ``interrupt()``.

    Args:
        state: a state object (``get_state``), or the dict ``invoke`` returned.

    Returns:
        A list of ``Interrupt`` (``.id``, ``.value``, ``.node``, ``.tool_call_id``,
        ``.message``, ``.reason``, ``.response_schema``).
    """
    if isinstance(state, dict):
        if state.get("state") is not None:
            return pending_interrupts(state["state"])
        data = (state.get("interrupt") or {}).get("data") or {}
    else:
        meta = getattr(state, "execution_meta", None)
        data = getattr(meta, "interrupt_data", None) or {}
    return [Interrupt.from_dict(d) for d in data.get("interrupts", [])]


def pending_interrupt(state: Any) -> Interrupt | None:
    """The first pending ``Interrupt`` of a paused state (or ``invoke`` result dict), or
    ``None`` when nothing is pending."""
    items = pending_interrupts(state)
    return items[0] if items else None
