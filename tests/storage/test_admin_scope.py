"""One rule for the admin scope, on every store: ``ADMIN_SCOPE`` (an object no user-supplied id
can equal) lists every user's threads while isolation is on; the string ``"*"`` is refused as a
user id by every API; the per-thread APIs take the owner's ``user_id``."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import ConfigError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import (
    ADMIN_SCOPE,
    InMemoryCheckpointer,
    PgCheckpointer,
    SqliteCheckpointer,
)
from tenxgraph.utils import END


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def cp(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        checkpointer: Any = InMemoryCheckpointer()
    elif request.param == "sqlite":
        checkpointer = SqliteCheckpointer(tmp_path / "admin.sqlite")
    else:
        schema = request.getfixturevalue("pg_schema")
        checkpointer = PgCheckpointer(request.getfixturevalue("pg_dsn"), schema=schema)
    checkpointer.put_state({"thread_id": "a-1", "user_id": "alice"}, AgentState())
    checkpointer.put_state({"thread_id": "b-1", "user_id": "bob"}, AgentState())
    yield checkpointer
    checkpointer.close()


def test_admin_scope_lists_every_users_threads(cp: Any) -> None:
    owners = {t.thread_id: t.user_id for t in cp.list_threads({"user_id": ADMIN_SCOPE})}
    assert owners == {"a-1": "alice", "b-1": "bob"}
    assert [t.thread_id for t in cp.list_threads({"user_id": "alice"})] == ["a-1"]
    # the owner named by the listing opens the thread
    assert cp.get_state({"thread_id": "b-1", "user_id": owners["b-1"]}) is not None


@pytest.mark.parametrize(
    "call",
    [
        lambda cp, uid: cp.list_threads({"user_id": uid}),
        lambda cp, uid: cp.get_state({"thread_id": "b-1", "user_id": uid}),
        lambda cp, uid: cp.get_state_history({"thread_id": "b-1", "user_id": uid}),
        lambda cp, uid: cp.put_state({"thread_id": "c-1", "user_id": uid}, AgentState()),
        lambda cp, uid: cp.clean_thread({"thread_id": "b-1", "user_id": uid}),
        lambda cp, uid: cp.list_messages({"thread_id": "b-1", "user_id": uid}),
    ],
)
def test_star_is_never_a_user_id(cp: Any, call: Any) -> None:
    with pytest.raises(ConfigError) as info:
        call(cp, "*")
    assert "ADMIN_SCOPE" in str(info.value)
    assert cp.list_threads({"user_id": ADMIN_SCOPE})  # nothing was deleted or written


@pytest.mark.parametrize(
    "call",
    [
        lambda cp: cp.get_state({"thread_id": "b-1", "user_id": ADMIN_SCOPE}),
        lambda cp: cp.put_state({"thread_id": "c-1", "user_id": ADMIN_SCOPE}, AgentState()),
        lambda cp: cp.clean_thread({"thread_id": "b-1", "user_id": ADMIN_SCOPE}),
    ],
)
def test_per_thread_apis_refuse_the_admin_scope(cp: Any, call: Any) -> None:
    with pytest.raises(ConfigError) as info:
        call(cp)
    assert "owner's user_id" in str(info.value)
    assert len(cp.list_threads({"user_id": ADMIN_SCOPE})) == 2


def test_a_run_refuses_both(tmp_path: Path) -> None:
    g = StateGraph()
    g.add_node("MAIN", lambda state: "ok")
    g.add_edge("MAIN", END)
    g.set_entry_point("MAIN")
    app = g.compile()
    for uid in ("*", ADMIN_SCOPE):
        with pytest.raises(ConfigError):
            app.invoke(
                {"messages": [Message.text_message("hi")]}, {"thread_id": "t", "user_id": uid}
            )


def test_admin_scope_is_one_object() -> None:
    assert pickle.loads(pickle.dumps(ADMIN_SCOPE)) is ADMIN_SCOPE
    assert repr(ADMIN_SCOPE) == "ADMIN_SCOPE"
    assert not isinstance(ADMIN_SCOPE, str)


def test_check_schema_never_creates_tables(pg_dsn: str, pg_schema: str, tmp_path: Path) -> None:
    from tenxgraph.core.exceptions import SchemaMissingError

    for cp in (PgCheckpointer(pg_dsn, schema=pg_schema), SqliteCheckpointer(tmp_path / "n.sqlite")):
        with pytest.raises(SchemaMissingError) as info:
            cp.check_schema()
        assert info.value.error_code == "STORAGE_SCHEMA_002"
        assert info.value.context["found"] is None
        with pytest.raises(SchemaMissingError):
            cp.check_schema()  # still missing: nothing was created
        cp.setup()
        cp.check_schema()
        cp.close()
    InMemoryCheckpointer().check_schema()  # no schema to check
