"""``tenxgraph users erase`` and ``tenxgraph threads sweep`` (docs/how-to/erasure-retention.md)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from tenxgraph.cli import main
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import PgCheckpointer, SqliteCheckpointer


def _seed(cp: object, user: str, tid: str) -> None:
    state = AgentState(context=[Message.text_message(f"{user} says hi")])
    cp.put_state({"thread_id": tid, "user_id": user}, state)  # type: ignore[attr-defined]


def test_users_erase_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    cp = SqliteCheckpointer(db)
    _seed(cp, "ann", "ann-1")
    _seed(cp, "ann", "ann-2")
    _seed(cp, "ben", "ben-1")
    cp.close()
    assert main(["users", "erase", "ann", "--db", db]) == 2  # refuses without --yes
    assert main(["users", "erase", "ann", "--db", db, "--yes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["threads"] == ["ann-1", "ann-2"]
    assert out["rows"]["threads"] == 2 and out["rows"]["messages"] == 2
    cp = SqliteCheckpointer(db)
    assert cp.list_threads({"user_id": "ann"}) == []
    assert [t.thread_id for t in cp.list_threads({"user_id": "ben"})] == ["ben-1"]
    cp.close()
    assert main(["users", "erase", "*", "--db", db, "--yes"]) == 2
    assert main(["users", "erase", "ben", "--db", db, "--yes", "--thread-id", "x"]) == 2


def test_threads_sweep_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    cp = SqliteCheckpointer(db)
    _seed(cp, "ann", "old")
    _seed(cp, "ann", "keep")
    cp.set_thread_ttl({"thread_id": "keep", "user_id": "ann"}, math.inf)
    cp.close()
    time.sleep(0.05)  # both threads are now idle for more than the 0.01 s TTL below
    assert main(["threads", "sweep", "--db", db]) == 2  # refuses without --yes
    with pytest.raises(SystemExit) as bad:
        main(["threads", "sweep", "--db", db, "--thread-ttl-s", "0"])
    assert bad.value.code == 2
    assert main(["threads", "sweep", "--db", db, "--yes", "--thread-ttl-s", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "expired 1 thread(s)" in out
    cp = SqliteCheckpointer(db)
    assert [t.thread_id for t in cp.list_threads({"user_id": "ann"})] == ["keep"]
    cp.close()


@pytest.mark.postgres
def test_users_erase_on_postgres(
    pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = PgCheckpointer(pg_dsn, schema=pg_schema)
    cp.setup()
    _seed(cp, "ann", "ann-1")
    _seed(cp, "ben", "ben-1")
    cp.close()
    code = main(["users", "erase", "ann", "--dsn", pg_dsn, "--schema", pg_schema, "--yes"])
    assert code == 0
    assert "erased 1 thread(s)" in capsys.readouterr().out
    cp = PgCheckpointer(pg_dsn, schema=pg_schema)
    assert cp.list_threads({"user_id": "ann"}) == []
    assert len(cp.list_threads({"user_id": "ben"})) == 1
    cp.close()
