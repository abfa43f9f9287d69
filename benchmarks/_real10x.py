"""The real 10xGraph as a contender, where a second environment can run it.

10xGraph needs Python 3.12+ and installs under the import name ``tenxgraph``, the same as this
project, so it cannot share the benchmark's interpreter: it runs in a worker process
(``_real10x_worker.py``) started with the interpreter of another environment, and
:class:`Real10xContender` drives it one run at a time, so its samples interleave with the other
contenders' exactly as theirs do (the worker times each run in its own event loop, with the
same clocks).

Point the benchmarks at that interpreter with ``--10xgraph-python PATH`` (``run_all.py``) or
``$TENXBENCH_10XGRAPH_PYTHON``; for example::

    python3.12 -m venv /opt/venv-10x
    /opt/venv-10x/bin/pip install '10xgraph[pg-checkpoint]' 'psycopg[binary,pool]'
    python benchmarks/run_all.py --10xgraph-python /opt/venv-10x/bin/python

Without one (or when it cannot import 10xGraph), the column is skipped and the report says why
in one line. 10xGraph's ``PgCheckpointer`` keeps its state in PostgreSQL *and* Redis, so its
Postgres row runs only when Redis answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from _contenders import Contender, Sample

HERE = Path(__file__).resolve().parent
ENV_VAR = "TENXBENCH_10XGRAPH_PYTHON"
_PROBE = (
    "import sys, tenxgraph, importlib.metadata as m;"
    "print(sys.version.split()[0], m.version('10xgraph'), tenxgraph.__file__)"
)


def find_real_10x(explicit: str | None = None) -> tuple[str | None, str]:
    """The interpreter that runs the real 10xGraph, and a one-line description.

    Args:
        explicit: a path given on the command line; ``None`` falls back to ``$TENXBENCH_10XGRAPH_PYTHON``.

    Returns:
        ``(path, "10xGraph X on Python Y")`` when it runs 10xGraph, else ``(None, why not)``.
    """
    path = explicit or os.environ.get(ENV_VAR)
    if not path:
        return None, (
            f"10xGraph column skipped: no second environment (set --10xgraph-python or ${ENV_VAR} "
            "to a Python 3.12+ interpreter with `pip install 10xgraph` done)"
        )
    try:
        out = subprocess.run(
            [path, "-I", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=os.path.expanduser("~"),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"10xGraph column skipped: {path} cannot run ({type(exc).__name__})"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"10xGraph column skipped: {path} cannot import 10xGraph ({last})"
    pyver, version, where = out.stdout.split()
    if Path(where).resolve().is_relative_to(HERE.parent / "tenxgraph"):
        return None, f"10xGraph column skipped: {path} imports this checkout, not 10xGraph"
    if tuple(int(x) for x in pyver.split(".")[:2]) < (3, 12):
        return None, f"10xGraph column skipped: {path} is Python {pyver} (10xGraph needs 3.12+)"
    return path, f"10xGraph {version} on Python {pyver}"


class Real10xContender(Contender):
    """The published 10xGraph on its ``InMemoryCheckpointer`` or ``PgCheckpointer``
    (Postgres + Redis), run in a worker process (see the module docstring).

    Args:
        name: display name.
        python: the second environment's interpreter (:func:`find_real_10x`).
        store: ``"memory"`` or ``"postgres"``.
        dsn: the bench database (``"postgres"``).
        redis_url: Redis, which 10xGraph's ``PgCheckpointer`` requires (``"postgres"``).
        schema: the Postgres schema of its tables.
    """

    family = "10xgraph"

    def __init__(
        self,
        name: str,
        python: str,
        store: str,
        *,
        dsn: str | None = None,
        redis_url: str | None = None,
        schema: str = "real10x",
    ) -> None:
        super().__init__(name)
        self.python = python
        self.store = store
        self.dsn = dsn
        self.redis_url = redis_url
        self.schema = schema
        self.uses_postgres = store == "postgres"
        self.proc: subprocess.Popen[str] | None = None

    def _url(self) -> str:
        """The bench database as a ``postgresql://`` URL (asyncpg, which 10xGraph uses, reads
        no ``key=value`` connection string)."""
        if not self.dsn or "://" in self.dsn:
            return self.dsn or ""
        from urllib.parse import quote

        from psycopg.conninfo import conninfo_to_dict

        d = conninfo_to_dict(self.dsn)
        auth = quote(str(d.get("user", "")), safe="")
        if d.get("password"):
            auth += ":" + quote(str(d["password"]), safe="")
        host = str(d.get("host", "localhost"))
        return f"postgresql://{auth}@{host}:{d.get('port', 5432)}/{d.get('dbname', '')}"

    def open(self) -> None:
        if self.store == "postgres":
            import psycopg

            with psycopg.connect(self.dsn or "", autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        self.proc = subprocess.Popen(
            [
                self.python,
                "-I",
                str(HERE / "_real10x_worker.py"),
                self.store,
                self._url(),
                self.redis_url or "",
                self.schema,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=os.path.expanduser("~"),
        )

    def _ask(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name}: the 10xGraph worker exited")
        out: dict[str, Any] = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"{self.name}: {out['error']}")
        return out

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            self._ask_close()
            self.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - a worker that does not stop is ended
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def _ask_close(self) -> None:
        assert self.proc is not None and self.proc.stdin
        self.proc.stdin.write(json.dumps({"op": "close"}) + "\n")
        self.proc.stdin.close()

    def prepare(self, history: int) -> str:
        return str(self._ask({"op": "prepare", "history": history})["thread_id"])

    def run(self, thread_id: str) -> Sample:
        out = self._ask({"op": "run", "thread_id": thread_id})
        return Sample(float(out["wall_s"]), float(out["cpu_s"]), int(out["steps"]))


def real_10x_contenders(
    python: str | None, dsn: str | None, redis_url: str | None, stores: tuple[str, ...]
) -> list[Contender]:
    """The 10xGraph contenders to add to a table: one per store of ``stores`` that can run
    (none without ``python``; ``"postgres"`` only with Redis)."""
    if python is None:
        return []
    out: list[Contender] = []
    for store in stores:
        if store == "postgres" and not redis_url:
            continue
        label = "InMemoryCheckpointer" if store == "memory" else "PgCheckpointer (Postgres+Redis)"
        out.append(
            Real10xContender(
                f"10xGraph {label}",
                python,
                store,
                dsn=dsn,
                redis_url=redis_url,
                schema=f"real10x_{store}_{int(time.time())}",
            )
        )
    return out
