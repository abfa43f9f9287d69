"""10xGraph's documented node and tool metrics, recorded through ``tenxgraph.utils.metrics``.

10xGraph's logging-and-metrics page lists ``agentflow.node.*`` and ``agentflow.tool.*``;
reading ``agentflow`` as ``tenxgraph`` they are recorded here as:

- ``tenxgraph.node.executions`` / ``.errors`` / ``.timeouts`` / ``.stopped`` (counters,
  attribute ``node``) and ``tenxgraph.node.duration`` (timer in ms, ``node``, ``outcome``);
- ``tenxgraph.tool.calls`` / ``.errors`` / ``.timeouts`` (counters, ``node``, ``tool``) and
  ``tenxgraph.tool.duration`` (timer in ms, ``node``, ``tool``, ``outcome``).

A node replayed after a crash counts as an execution again (it runs again); a tool answered
from the ledger is not a call (it does not run). ``outcome`` is ``"ok"`` or ``"error"``; a node
that pauses for a human is ``"ok"``. A tool failure that answers the model with an error
message counts in ``tool.errors`` (and ``outcome="error"``), as does one that stops the run.
"""

from __future__ import annotations

import time

from tenxgraph.core.exceptions import NodeTimeoutError, ToolTimeoutError
from tenxgraph.utils.metrics import _timer_metric, counter

__all__ = ["node_finished", "tool_finished"]


def node_finished(node: str, started: float, exc: BaseException | None, stopped: bool) -> None:
    """Record one node execution.

    Args:
        node: the node's name.
        started: ``time.perf_counter()`` when it started (seconds).
        exc: what it raised (``None``: it returned or paused).
        stopped: it ended early on a stop request.
    """
    attrs = {"node": node}
    counter("tenxgraph.node.executions").inc(1, attrs)
    failed = isinstance(exc, Exception)
    if failed:
        counter("tenxgraph.node.errors").inc(1, attrs)
        if isinstance(exc, NodeTimeoutError) and not isinstance(exc, ToolTimeoutError):
            counter("tenxgraph.node.timeouts").inc(1, attrs)
    if stopped:
        counter("tenxgraph.node.stopped").inc(1, attrs)
    _timer_metric("tenxgraph.node.duration").observe(
        (time.perf_counter() - started) * 1000.0,
        {"node": node, "outcome": "error" if failed else "ok"},
    )


def tool_finished(node: str, tool: str, started: float, failed: bool, timed_out: bool) -> None:
    """Record one tool call that ran.

    Args:
        node: the ToolNode's node name.
        tool: the tool's name.
        started: ``time.perf_counter()`` when it started (seconds).
        failed: it raised, timed out or was blocked (the model got an error answer, or the
            run stopped).
        timed_out: it ran past its ``tool_timeout``.
    """
    attrs = {"node": node, "tool": tool}
    counter("tenxgraph.tool.calls").inc(1, attrs)
    if failed:
        counter("tenxgraph.tool.errors").inc(1, attrs)
    if timed_out:
        counter("tenxgraph.tool.timeouts").inc(1, attrs)
    _timer_metric("tenxgraph.tool.duration").observe(
        (time.perf_counter() - started) * 1000.0,
        {**attrs, "outcome": "error" if failed else "ok"},
    )
