"""What telemetry costs per step when the application has no OpenTelemetry SDK.

Run: ``pytest benchmarks/bench_telemetry.py`` (pytest-benchmark, configured by
``benchmarks/pytest.ini``; add ``--benchmark-disable`` for a smoke run). No server needed.

The workload is a two-node loop (``A -> B -> A -> ...``) on the in-memory store, each node
appending one assistant message of about 200 characters, with a durable checkpoint after every
node; a round is :data:`RUNS_PER_ROUND` runs of :data:`STEPS_PER_RUN` steps on fresh threads,
all on one event loop. Three variants:

* ``no_sdk``: what a user without an SDK gets: the OpenTelemetry API's default no-op provider
  (tenxgraph's own fast path skips the context switch and the attribute dicts);
* ``compiled_out``: every telemetry entry point of tenxgraph (``span``, ``start_span``,
  ``use_span``, ``tracer``, ``enabled``, the metric instruments ...) monkeypatched to a trivial
  no-op in every tenxgraph module, as if the calls were not there;
* ``sdk``: an SDK tracer provider whose spans go to an exporter that drops them, for scale
  (it is not installed globally, so it cannot leak into the other variants).

pytest-benchmark's table gives each variant's time per round; the summary printed at the end
divides by the steps per round and compares ``no_sdk`` with ``compiled_out`` measured
interleaved (alternating rounds, the order flipping every round), which cancels the drift of a
busy machine: wall time (``time.perf_counter``) and CPU time of the event loop's thread
(``time.thread_time``, which other processes' load barely touches), both taken inside the loop;
the ratio is the median of the per-pair ratios. Nodes are ``async def`` (a ``def`` node would
add a worker-thread hop per step).
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from opentelemetry.trace import INVALID_SPAN, NoOpTracer

import tenxgraph.telemetry as telemetry
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END

#: Nodes executed per run (per ``ainvoke``).
STEPS_PER_RUN = 20
#: Runs (fresh threads) per measured round.
RUNS_PER_ROUND = 5
#: Steps per measured round.
STEPS_PER_ROUND = STEPS_PER_RUN * RUNS_PER_ROUND
#: Alternating rounds of each variant in the interleaved comparison.
INTERLEAVED_ROUNDS = 200

_TEXT = ("the booking was changed to the later flight and the seat kept; " * 4)[:200]

#: Median seconds per step of each variant, filled by the benchmarks, printed at the end.
_RESULTS: dict[str, float] = {}
#: Median of the per-pair ratios no_sdk / compiled_out of the interleaved rounds.
_RATIOS: dict[str, float] = {}


# -- the workload -------------------------------------------------------------------------------
async def _node(state: AgentState) -> str:
    # async: a sync node would run in a worker thread, adding a thread hop (and its noise).
    return _TEXT


def _route_to(other: str) -> Callable[[AgentState], str]:
    def route(state: AgentState) -> str:
        # execution_meta.step counts the nodes run before this one on the (fresh) thread.
        return END if state.execution_meta.step + 1 >= STEPS_PER_RUN else other

    return route


def build_app() -> Any:
    """The two-node loop on a fresh in-memory checkpointer (per-step durable checkpoints)."""
    graph = StateGraph()
    graph.add_node("A", _node)
    graph.add_node("B", _node)
    graph.add_conditional_edges("A", _route_to("B"), {"B": "B", END: END})
    graph.add_conditional_edges("B", _route_to("A"), {"A": "A", END: END})
    graph.set_entry_point("A")
    return graph.compile(checkpointer=InMemoryCheckpointer())


async def _round(app: Any) -> tuple[float, float]:
    """Run one round; returns its wall time and the CPU time of the event loop's thread
    (seconds), both measured inside the loop."""
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(RUNS_PER_ROUND):
        await app.ainvoke(
            {"messages": [_TEXT]}, {"thread_id": uuid.uuid4().hex, "user_id": "bench"}
        )
    return time.perf_counter() - t0, time.thread_time() - c0


# -- telemetry compiled out ---------------------------------------------------------------------
class _NullContext:
    __slots__ = ()

    def __enter__(self) -> Any:
        return INVALID_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


class _NullInstrument:
    __slots__ = ()

    def add(self, *args: Any, **kwargs: Any) -> None:
        return None

    def record(self, *args: Any, **kwargs: Any) -> None:
        return None


_NULL_CONTEXT = _NullContext()
_NULL_INSTRUMENT = _NullInstrument()
_NOOP_TRACER = NoOpTracer()

_REPLACEMENTS: dict[str, Any] = {
    "span": lambda *a, **k: _NULL_CONTEXT,
    "start_span": lambda *a, **k: INVALID_SPAN,
    "use_span": lambda *a, **k: _NULL_CONTEXT,
    "tracer": lambda: _NOOP_TRACER,
    "enabled": lambda: False,
    "record_error": lambda *a, **k: None,
    "add_conflict_event": lambda *a, **k: None,
    "counter": lambda *a, **k: _NULL_INSTRUMENT,
    "histogram": lambda *a, **k: _NULL_INSTRUMENT,
    "user_digest": lambda *a, **k: "",
}


@contextmanager
def compiled_out() -> Iterator[None]:
    """Replace every telemetry entry point by a trivial no-op in every loaded tenxgraph module
    (the names each module imported from :mod:`tenxgraph.telemetry` included)."""
    originals = {name: getattr(telemetry, name) for name in _REPLACEMENTS}
    patched: list[tuple[Any, str, Any]] = []
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not (mod_name == "tenxgraph" or mod_name.startswith("tenxgraph.")):
            continue
        for attr, original in originals.items():
            if getattr(mod, attr, None) is original:
                patched.append((mod, attr, original))
                setattr(mod, attr, _REPLACEMENTS[attr])
    try:
        yield
    finally:
        for mod, attr, original in reversed(patched):
            setattr(mod, attr, original)


@contextmanager
def sdk_tracer() -> Iterator[None]:
    """An SDK tracer (spans dropped by the exporter) in place of the global one, not installed
    globally."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class _Drop(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    sdk = provider.get_tracer(telemetry.INSTRUMENTATION_NAME)
    original = telemetry.tracer
    telemetry.tracer = lambda: sdk  # type: ignore[assignment]
    try:
        yield
    finally:
        telemetry.tracer = original  # type: ignore[assignment]
        provider.shutdown()


# -- fixtures -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    """One event loop for every round (asyncio, as the sync API uses)."""
    with start_blocking_portal(backend="asyncio") as p:
        yield p


@pytest.fixture(scope="module", autouse=True)
def _summary(request: pytest.FixtureRequest) -> Iterator[None]:
    """Skip when a provider is already installed; print the per-step summary at the end."""
    if telemetry.enabled():
        pytest.skip("a tracer provider is installed in this process: no_sdk cannot be measured")
    yield
    if not _RESULTS:
        return
    lines = ["", f"telemetry cost per step ({STEPS_PER_RUN}-step runs, in-memory store, medians):"]
    for name, per_step in _RESULTS.items():
        lines.append(f"  {name:<28} {per_step * 1e6:9.2f} us/step")
    for what, ratio in _RATIOS.items():
        lines.append(
            f"  no_sdk / compiled_out, {what}, median of paired rounds = {ratio:.3f} "
            f"({(ratio - 1) * 100:+.1f} %)"
        )
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print("\n".join(lines))
        return
    with capture.global_and_fixture_disabled():
        for line in lines:
            reporter.write_line(line)


def _measure(benchmark: Any, portal: BlockingPortal, app: Any, name: str) -> None:
    portal.call(_round, app)  # warm up: imports, caches, the portal's first call
    benchmark.extra_info["steps_per_round"] = STEPS_PER_ROUND
    benchmark.pedantic(portal.call, args=(_round, app), rounds=30, iterations=1, warmup_rounds=2)
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None:
        _RESULTS[name] = stats.stats.median / STEPS_PER_ROUND


# -- benchmarks ---------------------------------------------------------------------------------
@pytest.mark.benchmark(group="telemetry-per-round")
def bench_no_sdk(benchmark: Any, portal: BlockingPortal) -> None:
    """The API's default no-op provider: what a user without an SDK pays."""
    assert not telemetry.enabled()
    _measure(benchmark, portal, build_app(), "no_sdk")


@pytest.mark.benchmark(group="telemetry-per-round")
def bench_compiled_out(benchmark: Any, portal: BlockingPortal) -> None:
    """Telemetry replaced by trivial no-ops everywhere: the floor."""
    with compiled_out():
        _measure(benchmark, portal, build_app(), "compiled_out")


@pytest.mark.benchmark(group="telemetry-per-round")
def bench_sdk_spans_dropped(benchmark: Any, portal: BlockingPortal) -> None:
    """An SDK tracer recording every span (then dropped): for scale only."""
    with sdk_tracer():
        _measure(benchmark, portal, build_app(), "sdk (spans dropped)")


def bench_interleaved_overhead(portal: BlockingPortal) -> None:
    """``no_sdk`` against ``compiled_out``, alternating rounds (the order flipping every
    round) so both see the same machine load; records the medians per step, wall and CPU of
    the loop's thread, and the median of the per-pair ratios (printed in the summary)."""
    default_app = build_app()
    with compiled_out():
        floor_app = build_app()
    samples: dict[str, list[tuple[float, float]]] = {"no_sdk": [], "compiled_out": []}
    for i in range(INTERLEAVED_ROUNDS + 2):
        order = ("no_sdk", "compiled_out") if i % 2 == 0 else ("compiled_out", "no_sdk")
        for variant in order:
            if variant == "no_sdk":
                wall, cpu = portal.call(_round, default_app)
            else:
                with compiled_out():
                    wall, cpu = portal.call(_round, floor_app)
            if i >= 2:  # the first two rounds warm up
                samples[variant].append((wall / STEPS_PER_ROUND, cpu / STEPS_PER_ROUND))
    for variant, values in samples.items():
        _RESULTS[f"interleaved {variant}"] = statistics.median(w for w, _ in values)
        _RESULTS[f"interleaved {variant} (cpu)"] = statistics.median(c for _, c in values)
    pairs = list(zip(samples["no_sdk"], samples["compiled_out"], strict=True))
    _RATIOS["wall"] = statistics.median(a[0] / b[0] for a, b in pairs)
    _RATIOS["cpu"] = statistics.median(a[1] / b[1] for a, b in pairs)
    assert all(v > 0 for v in _RESULTS.values())
