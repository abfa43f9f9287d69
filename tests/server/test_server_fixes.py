"""Fixes found by a fresh user of ``tenxgraph serve``: thread writes wait for a running turn,
authentication without a user, error texts, paging bounds and message dicts in a state
update (one Postgres-backed server process)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import orjson
import pytest
from starlette.requests import Request

from tenxgraph.server._envelope import ApiError
from tenxgraph.server.auth import BaseAuth, authenticate
from tests.conftest import PG_DSN

from ._harness import Server, make_folder

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def server(pg_schema_module: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    config = make_folder(tmp_path_factory.mktemp("fixes"))
    srv = Server(
        config, {"TXG_STORE": "postgres", "TXG_DSN": PG_DSN, "TXG_SCHEMA": pg_schema_module}
    )
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def _msg(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "message_id": uuid.uuid4().hex}


def _data(r: httpx.Response) -> Any:
    assert r.status_code == 200, r.text
    return r.json()["data"]


def _wait_running(client: httpx.Client, thread: str) -> None:
    deadline = time.monotonic() + 20
    while True:  # a checkpoint of the slow turn says it is under way
        state = _data(client.get(f"/v1/threads/{thread}/state"))["state"]
        if state is not None and state["execution_meta"]["status"] == "running":
            return
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_thread_writes_wait_for_the_running_turn(client: httpx.Client, server: Server) -> None:
    """A PUT state and a POST messages during a turn wait for its lease: the turn finishes
    (200, not a conflict) and the thread holds both the turn and the writes."""
    thread = uuid.uuid4().hex
    _data(
        client.post(
            "/v1/graph/invoke", json={"messages": [_msg("hi")], "config": {"thread_id": thread}}
        )
    )
    body = {"messages": [_msg("slow turn")], "config": {"thread_id": thread}}
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(httpx.post, server.url + "/v1/graph/invoke", json=body, timeout=30)
        _wait_running(client, thread)
        put = client.put(f"/v1/threads/{thread}/state", json={"state": {"context_summary": "S"}})
        assert put.status_code == 200, put.text
        added = client.post(f"/v1/threads/{thread}/messages", json={"messages": [_msg("later")]})
        assert added.status_code == 200, added.text
        assert running.result().status_code == 200, running.result().text
    state = _data(client.get(f"/v1/threads/{thread}/state"))["state"]
    texts = [m["content"][0]["text"] for m in state["context"]]
    assert texts[4:8] == ["slow turn", "first: slow turn", "second: slow turn", "third: slow turn"]
    assert state["context_summary"] == "S"
    assert state["execution_meta"]["status"] == "completed"
    msgs = _data(client.get(f"/v1/threads/{thread}/messages"))["messages"]
    assert [m["content"][0]["text"] for m in msgs][-1] == "later"


class _Returns(BaseAuth):
    def __init__(self, value: Any) -> None:
        self.value = value

    def authenticate(self, request: Any, response: Any, credential: Any) -> Any:
        return self.value


class _Raises(BaseAuth):
    def authenticate(self, request: Any, response: Any, credential: Any) -> Any:
        raise RuntimeError("key server said: secret-internal-detail")


def _request() -> Request:
    return Request({"type": "http", "method": "GET", "path": "/", "headers": []})


@pytest.mark.anyio
@pytest.mark.parametrize("value", [None, {}, {"role": "x"}])
async def test_an_authenticator_naming_no_user_refuses(value: Any) -> None:
    """Only a server without auth serves ``"anonymous"``; an authenticator's ``None`` / ``{}``
    is refused as a bad token."""
    with pytest.raises(ApiError) as err:
        await authenticate(_Returns(value), _request())
    assert err.value.status == 403 and err.value.code == "INVALID_TOKEN"
    assert await authenticate(None, _request()) == {"user_id": "anonymous"}


@pytest.mark.anyio
async def test_an_authenticator_exception_text_is_not_sent() -> None:
    with pytest.raises(ApiError) as err:
        await authenticate(_Raises(), _request())
    assert err.value.status == 403 and "secret" not in err.value.message


def test_error_texts_sent_to_clients_carry_no_internals(client: httpx.Client) -> None:
    """A node exception's text stays out of the stream's error line (as out of invoke's 500);
    pydantic's documentation links and a long Last-Event-ID are not echoed."""
    thread = uuid.uuid4().hex
    body = {"messages": [_msg("boom")], "config": {"thread_id": thread}}
    with client.stream("POST", "/v1/graph/stream", json=body) as resp:
        last = [orjson.loads(x) for x in resp.iter_lines() if x.strip()][-1]
    assert last["event"] == "error" and last["data"]["error_code"] == "INTERNAL_ERROR"
    assert "internal detail" not in orjson.dumps(last).decode()
    bad = {"messages": [{"role": "user", "content": 5}], "config": {"thread_id": thread}}
    r = client.post("/v1/graph/invoke", json=bad)
    assert 400 <= r.status_code < 500 and "errors.pydantic.dev" not in r.text, r.text
    r = client.post("/v1/graph/stream", json=body, headers={"Last-Event-ID": "1:" + "x" * 5000})
    assert r.status_code == 422 and "x" * 101 not in r.text, r.text


@pytest.mark.parametrize(
    "query",
    [
        "offset=99999999999999999999",
        "offset=9223372036854775808",
        "limit=99999999999999999999",
        "offset=-1",
        "limit=0",
        "offset=1_000",
        "offset=%EF%BC%91",
    ],
)
def test_paging_bounds_are_checked_before_the_store(client: httpx.Client, query: str) -> None:
    thread = uuid.uuid4().hex
    for path in ("/v1/threads", f"/v1/threads/{thread}/messages"):
        r = client.get(f"{path}?{query}")
        assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION_ERROR", r.text
    assert client.get("/v1/threads?offset=9223372036854775807&limit=1").status_code == 200


def test_put_state_parses_message_dicts_in_context(client: httpx.Client) -> None:
    thread = uuid.uuid4().hex
    _data(
        client.post(
            "/v1/graph/invoke", json={"messages": [_msg("hi")], "config": {"thread_id": thread}}
        )
    )
    added = _msg("set by PUT")
    put = client.put(f"/v1/threads/{thread}/state", json={"state": {"context": [added]}})
    assert put.status_code == 200, put.text
    texts = [m["content"][0]["text"] for m in _data(put)["state"]["context"]]
    assert texts[-1] == "set by PUT"
    bad = client.put(f"/v1/threads/{thread}/state", json={"state": {"context": [{"role": 5}]}})
    assert bad.status_code == 422 and bad.json()["error"]["details"][0]["loc"][:2] == ["context", 0]
    assert "errors.pydantic.dev" not in bad.text
