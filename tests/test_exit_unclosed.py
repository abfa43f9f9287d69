"""An application that exits without closing its checkpointers leaves nothing behind: no
``Task was destroyed but it is pending!``, no ``Future exception was never retrieved``, no
``ResourceWarning`` under ``-W default``; its stderr is empty, whether it used the sync API (the
portal's loop) or ``asyncio.run``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys
    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import Message
    from tenxgraph.storage.checkpointer import (
        InMemoryCheckpointer, PgCheckpointer, SqliteCheckpointer,
    )
    from tenxgraph.utils import END

    dsn, redis_url, schema, prefix, folder, mode = sys.argv[1:7]

    def app(cp):
        g = StateGraph()
        g.add_node("MAIN", lambda state: "ok")
        g.add_edge("MAIN", END)
        g.set_entry_point("MAIN")
        return g.compile(checkpointer=cp)

    cps = []
    for i in range(3):  # three of each kind, never closed
        cps.append(InMemoryCheckpointer())
        cps.append(SqliteCheckpointer(os.path.join(folder, f"s{i}.sqlite")))
        cps.append(PgCheckpointer(dsn, schema=schema))
        cps.append(PgCheckpointer(dsn, schema=schema, redis_url=redis_url, redis_prefix=prefix))
    msg = lambda: {"messages": [Message.text_message("hi")]}
    if mode == "dropped":
        # checkpointers dropped without close() while the process goes on: once collected,
        # their Postgres connections are released without a word on stderr (a graph run
        # keeps its checkpointer referenced from pending timers of the run's context for up
        # to node_timeout, so this case uses the checkpointer API directly)
        import gc, time, uuid
        import psycopg
        tag = "unclosed-" + uuid.uuid4().hex[:8]
        dropped = []
        def use(n):
            cp = PgCheckpointer(dsn, schema=schema, redis_url=redis_url, redis_prefix=prefix,
                                pool_config={"kwargs": {"application_name": tag}})
            cp.setup()
            cp.get_state({"thread_id": f"d{n}"})
            dropped.append(cp)
        def open_conns():
            with psycopg.connect(dsn, autocommit=True) as c:
                q = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                return c.execute(q, (tag,)).fetchone()[0]
        for n in range(3):
            use(n)
        assert open_conns() > 0
        cps.clear()
        dropped.clear()
        gc.collect()
        deadline = time.monotonic() + 10
        while open_conns() and time.monotonic() < deadline:
            time.sleep(0.05)
        print("left open", open_conns())
        print("ran", 12)
        sys.exit(0)
    if mode == "sync":
        for n, cp in enumerate(cps):
            app(cp).invoke(msg(), {"thread_id": f"t{n}"})
    else:
        async def main():
            for n, cp in enumerate(cps):
                await app(cp).ainvoke(msg(), {"thread_id": f"t{n}"})
        asyncio.run(main())
    print("ran", len(cps))
    """
)


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize("mode", ["sync", "async", "dropped"])
def test_exit_without_close_is_quiet(
    mode: str, tmp_path: Path, pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str
) -> None:
    script = tmp_path / "unclosed.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-W", "default", str(script), pg_dsn, redis_url, pg_schema,
         redis_prefix, str(tmp_path), mode],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ran 12")
    if mode == "dropped":
        assert "left open 0" in proc.stdout
    assert proc.stderr == ""


def test_connection_noise_of_a_pool_we_closed_is_dropped_and_nothing_else() -> None:
    """psycopg_pool's "error connecting" line for a pool tenxgraph closed (a connection attempt
    that was in flight when the pool or its loop went away) does not reach stderr; the same line
    for any other pool, and every other record, still does."""
    import logging

    from tenxgraph.storage import postgres

    pool_log = logging.getLogger("psycopg.pool")
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep()
    pool_log.addHandler(handler)
    postgres._CLOSED_POOLS.add("pool-closed-by-test")
    try:
        pool_log.warning("error connecting in %r: %s", "pool-closed-by-test", "")
        pool_log.warning("error connecting in %r: %s", "pool-still-open", "refused")
        pool_log.warning("discarding closed connection: %s", "pool-closed-by-test")
    finally:
        pool_log.removeHandler(handler)
        postgres._CLOSED_POOLS.discard("pool-closed-by-test")
    assert seen == [
        "error connecting in 'pool-still-open': refused",
        "discarding closed connection: pool-closed-by-test",
    ]
