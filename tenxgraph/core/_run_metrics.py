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
from tenxgraph.utils.metrics import Counter, TimerMetric, _count_and_time, _timer_metric, counter

__all__ = ["node_finished", "tool_finished"]


_node_metrics: tuple[Counter, Counter, Counter, Counter, TimerMetric] | None = None


def _node_instruments() -> tuple[Counter, Counter, Counter, Counter, TimerMetric]:
    """The node metrics, looked up once (they are process-wide objects that
    ``setup_otel_metrics`` re-binds in place, so keeping them is safe)."""
    global _node_metrics
    if _node_metrics is None:
        _node_metrics = (
            counter("tenxgraph.node.executions"),
            counter("tenxgraph.node.errors"),
            counter("tenxgraph.node.timeouts"),
            counter("tenxgraph.node.stopped"),
            _timer_metric("tenxgraph.node.duration"),
        )
    return _node_metrics


def node_finished(node: str, started: float, exc: BaseException | None, stopped: bool) -> None:
    """Record one node execution.

    Args:
        node: the node's name.
        started: ``time.perf_counter()`` when it started (seconds).
        exc: what it raised (``None``: it returned or paused).
        stopped: it ended early on a stop request.
    """
    executions, errors, timeouts, stops, duration = _node_metrics or _node_instruments()
    elapsed_ms = (time.perf_counter() - started) * 1000.0  # >= 0: perf_counter is monotonic
    attrs, ok, err = _NODE_ATTRS.get(node) or _node_attrs(node)
    if exc is None or not isinstance(exc, Exception):
        _count_and_time(executions, attrs, duration, elapsed_ms, ok)
        if stopped:
            stops._add(1, attrs)  # noqa: SLF001 - same package, a known-valid amount
        return
    executions._add(1, attrs)  # noqa: SLF001
    errors._add(1, attrs)  # noqa: SLF001
    if isinstance(exc, NodeTimeoutError) and not isinstance(exc, ToolTimeoutError):
        timeouts._add(1, attrs)  # noqa: SLF001
    if stopped:
        stops._add(1, attrs)  # noqa: SLF001
    duration._observe(elapsed_ms, err)  # noqa: SLF001


#: Per node name, the metric attribute dicts of :func:`node_finished`: ``{"node"}``, and with
#: ``outcome`` ``"ok"`` / ``"error"``. Made once per name (a step records two or three
#: measurements; building the dicts each time cost more than recording them). Never mutated:
#: metric SDKs may keep a reference to the attributes of a data point.
_NODE_ATTRS: dict[str, tuple[dict[str, str], dict[str, str], dict[str, str]]] = {}
#: At most this many node names are kept (graphs built on the fly may have many).
_NODE_ATTRS_MAX = 4096


def _node_attrs(node: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    attrs = (
        {"node": node},
        {"node": node, "outcome": "ok"},
        {"node": node, "outcome": "error"},
    )
    if len(_NODE_ATTRS) < _NODE_ATTRS_MAX:
        _NODE_ATTRS[node] = attrs
    return attrs


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
