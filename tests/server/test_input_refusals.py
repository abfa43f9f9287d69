"""Request inputs the server refuses instead of reading them some other way: a boolean
``recursion_limit`` and two input messages sharing one ``message_id`` (in-process app)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState
from tenxgraph.server import create_app
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio


def _echo(state: AgentState) -> str:
    return f"seen {len(state.context)}"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    g = StateGraph()
    g.add_node("echo", _echo)
    g.set_entry_point("echo")
    g.add_edge("echo", END)
    app = create_app(g.compile(checkpointer=InMemoryCheckpointer()), recovery=False)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            yield c


def _msg(text: str, message_id: str | None = None) -> dict[str, Any]:
    return {"role": "user", "content": text, "message_id": message_id or uuid.uuid4().hex}


async def test_boolean_recursion_limit_is_refused(client: httpx.AsyncClient) -> None:
    body = {"messages": [_msg("hi")], "recursion_limit": True}
    r = await client.post("/v1/graph/invoke", json=body)
    assert r.status_code == 422, r.text
    assert "recursion_limit" in r.text and "boolean" in r.text
    ok = await client.post("/v1/graph/invoke", json={**body, "recursion_limit": 3})
    assert ok.status_code == 200, ok.text


async def test_two_messages_with_one_id_are_refused_before_anything_is_stored(
    client: httpx.AsyncClient,
) -> None:
    thread = uuid.uuid4().hex
    same = uuid.uuid4().hex
    body = {"messages": [_msg("a", same), _msg("b", same)], "config": {"thread_id": thread}}
    r = await client.post("/v1/graph/invoke", json=body)
    assert r.status_code == 422, r.text
    assert same in r.text and "messages[1]" in r.text
    state = await client.get(f"/v1/threads/{thread}/state")
    assert state.status_code == 200 and state.json()["data"]["state"] is None, state.text
