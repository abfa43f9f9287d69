"""Per-step cost back to back versus after an idle gap: what ``run_all.py``'s interleaving costs.

``run_all.py`` samples its contenders in turn (one run of one contender, then one of the next
...), so each sample of a contender starts after the others ran: its CPU caches and branch
predictors are cold, and on a VM its virtual CPU may have been idle. This script measures one
contender at a time instead, on fresh threads, in three ways:

* ``back-to-back``: runs one after the other (the contender's best case);
* ``idle gap``: the process sleeps ``--gap-ms`` before each run (a server between requests);
* ``interleaved``: each run of the contender follows one run of every other contender of this
  script (what ``run_all.py``'s sections do).

A control row runs a fixed piece of pure-Python work with no runtime and no I/O: whatever the
idle gap or the interleaving costs it, the machine charges any CPU-bound Python code.

    python benchmarks/steady_state.py                 # memory, Postgres, the floor, LangGraph
    python benchmarks/steady_state.py --runs 300 --gap-ms 5

Prints ms/step (wall) and client CPU ms/step, medians over the runs. Needs the servers of
``run_all.py`` (a private database ``tenxbench_<random>`` is created and dropped).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _contenders import (  # noqa: E402
    Contender,
    FloorContender,
    LangGraphContender,
    Sample,
    TenxContender,
)
from _pg import BenchDatabase  # noqa: E402
from _workload import STEPS_PER_RUN  # noqa: E402

MODES = ("back-to-back", "idle gap", "interleaved")


class ControlContender(Contender):
    """No runtime and no I/O: each "step" is the same fixed piece of pure-Python work (a dict
    and list workout of about the size of a memory-store step). What an idle gap or
    interleaving costs it is what the machine itself charges CPU-bound Python code (caches and
    predictors refilled, a virtual CPU woken), the baseline to read the other rows against."""

    family = "control"

    def prepare(self, history: int) -> str:
        return "control"

    def run(self, thread_id: str) -> Sample:
        c0 = time.process_time()
        t0 = time.perf_counter()
        for step in range(STEPS_PER_RUN):
            d = {f"k{i}": i * step for i in range(300)}
            sum(sorted(d.values(), reverse=True)[:20])
        return Sample(time.perf_counter() - t0, time.process_time() - c0, STEPS_PER_RUN)


def _sample(c: Contender) -> Sample:
    return c.run(c.prepare(0))


def measure(contenders: list[Contender], runs: int, gap_s: float) -> dict[str, dict[str, Any]]:
    """``{contender name: {mode: (median ms/step, median CPU ms/step)}}``."""
    out: dict[str, dict[str, Any]] = {c.name: {} for c in contenders}
    for c in contenders:
        for _ in range(10):  # warm-up
            _sample(c)
    for mode in MODES:
        for c in contenders:
            samples: list[Sample] = []
            for _ in range(runs):
                if mode == "idle gap":
                    time.sleep(gap_s)
                elif mode == "interleaved":
                    for other in contenders:
                        if other is not c:
                            _sample(other)
                samples.append(_sample(c))
            out[c.name][mode] = (
                statistics.median(s.ms_per_step for s in samples),
                statistics.median(s.cpu_ms_per_step for s in samples),
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--runs", type=int, default=200, help="runs per contender and mode")
    ap.add_argument("--gap-ms", type=float, default=5.0, help="sleep before each run, idle gap")
    args = ap.parse_args(argv)
    with BenchDatabase(args.dsn) as db:
        contenders: list[Contender] = [
            TenxContender("tenxgraph memory", "memory"),
            TenxContender("tenxgraph Postgres", "postgres", dsn=db.dsn),
            LangGraphContender("LangGraph InMemorySaver", "memory"),
            LangGraphContender("LangGraph PostgresSaver", "postgres", dsn=db.dsn),
            FloorContender("floor: BEGIN+INSERT+COMMIT, 1 round trip", db.dsn),
            ControlContender("control: pure Python, no I/O"),
        ]
        for c in contenders:
            c.open()
        try:
            res = measure(contenders, args.runs, args.gap_ms / 1e3)
        finally:
            for c in contenders:
                c.close()
    print(f"medians over {args.runs} runs of fresh threads; idle gap {args.gap_ms:g} ms\n")
    print("| contender | " + " | ".join(f"{m}: ms/step (CPU)" for m in MODES) + " |")
    print("| --- |" + " --- |" * len(MODES))
    for name, per in res.items():
        cells = [f"{per[m][0]:.3f} ({per[m][1]:.3f})" for m in MODES]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
