"""Worker processes for the recovery tests: ``python -m tenxgraph.worker --graph
_graphapp:app`` with the ``RECOVERY_*`` environment of :mod:`_graphapp`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


class Fleet:
    """Starts, kills and stops worker processes sharing one store.

    Args:
        tmp: a folder for the event, effect and log files.
        store: the ``RECOVERY_STORE`` value.
        hang: the ``RECOVERY_HANG`` value.
        concurrency: each worker's ``--concurrency``.
        sweep_s: each worker's ``--sweep-interval``.
        grace_s: each worker's ``--grace-s`` (short: most tests' runs hang on purpose).
        poison: the ``RECOVERY_POISON`` value (a thread whose run kills its worker).
    """

    def __init__(
        self,
        tmp: Path,
        store: str,
        hang: str = "",
        concurrency: int = 4,
        sweep_s: float = 0.2,
        node_s: float = 0.0,
        max_crashes: int = 3,
        config: Path | None = None,
        grace_s: float = 2.0,
        poison: str = "",
    ) -> None:
        self.tmp = tmp
        self.events = tmp / "events.txt"
        self.effects = tmp / "effects.txt"
        self.store = store
        self.hang = hang
        self.concurrency = concurrency
        self.sweep_s = sweep_s
        self.node_s = node_s
        self.max_crashes = max_crashes
        self.config = config
        self.grace_s = grace_s
        self.poison = poison
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.started = 0

    def env(self) -> dict[str, str]:
        return dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]),
            RECOVERY_STORE=self.store,
            RECOVERY_EVENTS=str(self.events),
            RECOVERY_EFFECTS=str(self.effects),
            RECOVERY_HANG=self.hang,
            RECOVERY_NODE_S=str(self.node_s),
            RECOVERY_POISON=self.poison,
        )

    def start(self, name: str, wait: bool = True) -> subprocess.Popen[bytes]:
        """Start worker ``name`` (its stderr in ``<name>.log``); wait for its ready line."""
        self.started += 1
        log = self.tmp / f"{name}.{self.started}.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tenxgraph.worker",
                    *(
                        ["--graph", "_graphapp:app"]
                        if self.config is None
                        else ["--config", str(self.config)]
                    ),
                    "--concurrency",
                    str(self.concurrency),
                    "--sweep-interval",
                    str(self.sweep_s),
                    "--worker-id",
                    name,
                    "--max-crashes",
                    str(self.max_crashes),
                    "--grace-s",
                    str(self.grace_s),
                ],
                env=self.env(),
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=self.tmp,
            )
        self.procs[name] = proc
        if wait:
            deadline = time.monotonic() + 60
            while b"ready" not in log.read_bytes():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"worker {name} did not start: {log.read_text()}")
                time.sleep(0.02)
        return proc

    def kill(self, name: str) -> None:
        """SIGKILL worker ``name`` and reap it."""
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def name_of(self, pid: int) -> str:
        return next(n for n, p in self.procs.items() if p.pid == pid)

    def terminate(self, name: str, timeout_s: float = 20) -> int:
        """SIGTERM worker ``name``; its exit code."""
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=timeout_s)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()

    def event_lines(self) -> list[list[str]]:
        if not self.events.exists():
            return []
        return [line.split() for line in self.events.read_text().splitlines() if line.strip()]

    def wait_event(self, kind: str, timeout_s: float = 60) -> list[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for ev in self.event_lines():
                if ev[0] == kind:
                    return ev
            time.sleep(0.01)
        raise AssertionError(f"no {kind!r} event within {timeout_s} s")

    def effect_counts(self) -> Counter[str]:
        if not self.effects.exists():
            return Counter()
        return Counter(
            line.split()[0] for line in self.effects.read_text().splitlines() if line.strip()
        )
