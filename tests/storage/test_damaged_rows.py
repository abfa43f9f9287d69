"""Checkpoint rows damaged outside tenxgraph (NULL or wrong-typed array elements, impossible
counters) surface as ``SerializationError`` from every read API and from the next turn, on SQLite
and on Postgres; the history leaves the damaged version out instead of failing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio

USER = "u"
TID = "damaged"
CFG = {"thread_id": TID, "user_id": USER}


def _app(cp: Any) -> Any:
    async def answer(state: AgentState) -> Message:
        return Message.text_message(f"echo {state.context[-1].text()}", role="assistant")

    g = StateGraph()
    g.add_node("answer", answer)
    g.set_entry_point("answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=cp)


class Store:
    """A checkpointer plus a raw connection to the same database, to damage rows with."""

    def __init__(self, kind: str, cp: Any, execute: Any, ranges: dict[str, Any]) -> None:
        self.kind, self.cp, self.execute, self.ranges = kind, cp, execute, ranges

    async def fresh(self) -> None:
        await self.cp.store.invalidate(self.cp.key_for(dict(CFG)))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        path = tmp_path / "damaged.db"
        cp = SqliteCheckpointer(str(path))
        await cp.asetup()
        conn = sqlite3.connect(str(path), isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 5000")

        def execute(sql: str, args: tuple[Any, ...] = ()) -> None:
            conn.execute(sql.replace("{t}", "").replace("%s", "?"), args)

        bad = {
            "null": "[[null, null]]",
            "bool": "[[true, 1]]",
            "float": "[[0.5, 1]]",
            "text": '[["0", "1"]]',
        }
        try:
            yield Store("sqlite", cp, execute, bad)
        finally:
            conn.close()
            await cp.aclose()
    else:
        pytest.importorskip("psycopg_pool")
        import psycopg

        from tenxgraph.storage.checkpointer import PgCheckpointer

        dsn: str = request.getfixturevalue("pg_dsn")
        schema: str = request.getfixturevalue("pg_schema")
        cp = PgCheckpointer(dsn, schema=schema)
        await cp.asetup()
        conn = psycopg.connect(dsn, autocommit=True)

        def execute(sql: str, args: tuple[Any, ...] = ()) -> None:
            conn.execute(sql.replace("{t}", f'"{schema}".tenxgraph_'), args)  # type: ignore[arg-type]

        bad = {"null": "{NULL,NULL}", "half-null": "{0,NULL}", "null-start": "{NULL,1}"}
        try:
            yield Store("postgres", cp, execute, bad)
        finally:
            conn.close()
            await cp.aclose()


async def _three_turns(cp: Any) -> Any:
    app = _app(cp)
    for i in range(3):
        await app.ainvoke({"messages": [Message.text_message(f"q{i}")]}, dict(CFG))
    return app


async def test_wrong_typed_range_elements_are_serialization_errors(store: Store) -> None:
    app = await _three_turns(store.cp)
    for name, bad in store.ranges.items():
        store.execute(
            "UPDATE {t}checkpoints SET ranges = %s WHERE thread_id = %s AND version = 3", (bad, TID)
        )
        await store.fresh()
        for what, call in [
            ("get_state", lambda: store.cp.aget_state(dict(CFG))),
            ("aget_version", lambda: store.cp.aget_version(dict(CFG), 3)),
            ("list_messages", lambda: store.cp.alist_messages(dict(CFG))),
            (
                "invoke",
                lambda: app.ainvoke({"messages": [Message.text_message("again")]}, dict(CFG)),
            ),
        ]:
            with pytest.raises(SerializationError) as info:
                await call()
            assert info.value.context["thread_id"] == TID, (name, what)
            assert info.value.context["version"] == 3, (name, what)
        # The history leaves the damaged version out and returns the others.
        hist = await store.cp.aget_state_history(dict(CFG))
        assert [s.version for s in hist] == [2, 1], name


@pytest.mark.parametrize("column", ["next_seq", "version"])
async def test_a_counter_at_the_int64_limit_fails_the_next_turn_cleanly(
    store: Store, column: str
) -> None:
    app = await _three_turns(store.cp)
    top = 9223372036854775807
    store.execute(
        f"UPDATE {{t}}checkpoints SET {column} = %s WHERE thread_id = %s AND version = 3",
        (top, TID),
    )
    if column == "version":  # the thread row points at its newest version
        store.execute("UPDATE {t}threads SET version = %s WHERE thread_id = %s", (top, TID))
    await store.fresh()
    with pytest.raises(SerializationError) as info:
        await app.ainvoke({"messages": [Message.text_message("again")]}, dict(CFG))
    assert info.value.context["thread_id"] == TID
    assert info.value.context["path"] == f"$.{column}"
    # Nothing was written: the thread still points at the damaged version.
    await store.fresh()
    assert await store.cp.store.current_version(store.cp.key_for(dict(CFG))) == (
        top if column == "version" else 3
    )
