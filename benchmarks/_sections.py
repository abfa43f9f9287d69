"""Load average per benchmark section: record it, flag a section measured on a busy machine,
and rerun it when asked.

A section is one call of ``run_all.py`` (fresh thread, growth, wire counts, ...). While it runs,
a thread samples ``/proc/loadavg`` every half second: the 1-minute load average at the start
and the end, and the mean number of runnable tasks (its fourth field). The benchmark itself
keeps at most about two tasks runnable (the client and the Postgres backend serving it; more
for the concurrency section), so a mean above ``cores + 1`` means something else competed for
the CPU: the section is flagged ``busy``. With ``reruns`` > 0, a busy section runs again (up
to ``reruns`` times, after waiting up to ``wait_s`` seconds for the machine to calm down) and
the least busy attempt is kept.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["SectionLoad", "run_section"]


def _read() -> tuple[float, int]:
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            parts = f.read().split()
        return float(parts[0]), int(parts[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        la = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        return la, 0


class SectionLoad:
    """Samples the machine's load while a section runs (a context manager)."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.runnable: list[int] = []
        self.load_start = self.load_end = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> SectionLoad:
        self.load_start = _read()[0]
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.load_end = _read()[0]

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            # minus one: the sampling thread itself is running while it reads
            self.runnable.append(max(0, _read()[1] - 1))

    def summary(self, threshold: float) -> dict[str, Any]:
        mean = statistics.fmean(self.runnable) if self.runnable else 0.0
        return {
            "load1_start": round(self.load_start, 2),
            "load1_end": round(self.load_end, 2),
            "runnable_mean": round(mean, 2),
            "busy": mean > threshold,
        }


def run_section(
    name: str,
    fn: Callable[[], Any],
    *,
    reruns: int = 0,
    wait_s: float = 60.0,
    threshold: float | None = None,
    log: Callable[[str], None] = print,
) -> tuple[Any, dict[str, Any]]:
    """Run ``fn`` as section ``name``; returns ``(its result, its load record)``.

    The load record holds the attempts' summaries (``attempts``), the kept one's fields and
    ``busy`` (``True`` when even the kept attempt ran on a busy machine).
    """
    limit = threshold if threshold is not None else (os.cpu_count() or 1) + 1.0
    attempts: list[dict[str, Any]] = []
    best: tuple[float, Any, dict[str, Any]] | None = None
    for attempt in range(reruns + 1):
        if attempt:
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and _read()[0] > limit:
                time.sleep(2)
        with SectionLoad() as load:
            out = fn()
        summ = load.summary(limit)
        attempts.append(summ)
        if best is None or summ["runnable_mean"] < best[0]:
            best = (summ["runnable_mean"], out, summ)
        flag = " BUSY" if summ["busy"] else ""
        log(
            f"  section {name}: load {summ['load1_start']} -> {summ['load1_end']}, "
            f"runnable {summ['runnable_mean']}{flag}"
        )
        if not summ["busy"]:
            break
    assert best is not None
    record = dict(best[2])
    record["threshold"] = limit
    record["attempts"] = attempts
    return best[1], record
