"""Every route of 10xGraph's REST API over real HTTP against one ``tenxgraph serve`` process
(Postgres-backed graph in its own schema), with 10xGraph's shapes; bad input answered 4xx with
the error envelope and nothing written."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import PG_DSN

from ._harness import Server, make_folder

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def server(pg_schema_module: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    config = make_folder(tmp_path_factory.mktemp("routes"))
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


def _msg(text: str, mid: str | None = None) -> dict[str, Any]:
    return {"role": "user", "content": text, "message_id": mid or uuid.uuid4().hex}


def _ok(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"success", "data", "metadata"} and body["success"] is True
    assert set(body["metadata"]) == {"request_id", "timestamp", "message"}
    assert r.headers["x-request-id"] == body["metadata"]["request_id"]
    return body["data"]


def _err(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error", "metadata"}
    assert set(body["error"]) == {"code", "message", "details"}
    if code is not None:
        assert body["error"]["code"] == code, body
    return dict(body["error"])


def _turn(client: httpx.Client, thread: str, text: str = "hello", mid: str | None = None) -> Any:
    r = client.post(
        "/v1/graph/invoke", json={"messages": [_msg(text, mid)], "config": {"thread_id": thread}}
    )
    return r, _ok(r)


def test_ping_and_ready(client: httpx.Client, server: Server) -> None:
    assert _ok(client.get("/ping")) == "pong"
    assert _ok(client.get("/health/ready")) == {"status": "ready"}
    assert "authentication is off" in server.output()
    # a client's request id is echoed
    r = client.get("/ping", headers={"X-Request-ID": "abc-123"})
    assert _ok(r) == "pong" and r.json()["metadata"]["request_id"] == "abc-123"


def test_invoke_shape_and_idempotent_retry(client: httpx.Client) -> None:
    thread, mid = uuid.uuid4().hex, uuid.uuid4().hex
    r, data = _turn(client, thread, "hi", mid)
    assert set(data) == {"messages", "state", "context", "summary", "meta"}
    texts = [m["content"][0]["text"] for m in data["messages"]]
    assert texts == ["hi", "first: hi", "second: hi", "third: hi"]
    assert data["meta"]["thread_id"] == thread and data["meta"]["already_processed"] is False
    assert data["meta"]["is_new_thread"] is False
    assert "x-tenxgraph-already-processed" not in r.headers
    r2, again = _turn(client, thread, "hi", mid)
    assert r2.headers["x-tenxgraph-already-processed"] == "true"
    assert [m["message_id"] for m in again["messages"]] == [
        m["message_id"] for m in data["messages"]
    ]
    assert again["meta"]["already_processed"] is True
    # nothing stored twice
    msgs = _ok(client.get(f"/v1/threads/{thread}/messages"))["messages"]
    assert len(msgs) == 4
    # granularity full adds the state
    r = client.post(
        "/v1/graph/invoke",
        json={
            "messages": [_msg("more")],
            "config": {"thread_id": thread},
            "response_granularity": "full",
        },
    )
    full = _ok(r)
    assert full["state"]["context"][-1]["content"][0]["text"] == "third: more"


def test_stream_ndjson_lines_have_ids(client: httpx.Client) -> None:
    thread, mid = uuid.uuid4().hex, uuid.uuid4().hex
    with client.stream(
        "POST",
        "/v1/graph/stream",
        json={"messages": [_msg("s", mid)], "config": {"thread_id": thread}},
    ) as r:
        assert r.status_code == 200
        lines = [orjson.loads(line) for line in r.iter_lines() if line.strip()]
    events = [c["event"] for c in lines]
    assert events[0] == "message" and events[-1] == "state"
    ids = [c["metadata"]["event_id"] for c in lines]
    assert [int(i.split(":")[0]) for i in ids] == list(range(1, len(lines) + 1))
    assert ids[0] == f"1:{mid}"
    texts = [c["message"]["content"][0]["text"] for c in lines if c["event"] == "message"]
    assert texts == ["s", "first: s", "second: s", "third: s"]
    assert all(c["thread_id"] == thread for c in lines)
    assert all(c["metadata"]["thread_id"] == thread for c in lines)
    assert not any(c["metadata"]["is_new_thread"] for c in lines)


def test_a_request_without_thread_id_starts_a_new_thread(client: httpx.Client) -> None:
    data = _ok(client.post("/v1/graph/invoke", json={"messages": [_msg("new")]}))
    assert data["meta"]["is_new_thread"] is True and data["meta"]["thread_id"]
    stored = _ok(client.get(f"/v1/threads/{data['meta']['thread_id']}/messages"))["messages"]
    assert len(stored) == 4


def test_graph_details_schema_and_tools(client: httpx.Client) -> None:
    g = _ok(client.get("/v1/graph"))
    assert set(g) == {"info", "nodes", "edges"}
    assert {n["name"] for n in g["nodes"]} >= {"first", "second", "third", "tools"}
    assert {"source": "first", "target": "second", "id": "first->second"} in g["edges"]
    assert g["info"]["checkpointer_type"] == "PgCheckpointer" and g["info"]["node_count"] == 6
    schema = _ok(client.get("/v1/graph:StateSchema"))
    assert "context" in schema["properties"]
    assert g["info"]["is_realtime"] is False
    tools = _ok(client.get("/v1/graph/tools"))
    assert tools["node_count"] == 1 and tools["tool_count"] == 1
    (node,) = tools["nodes"]
    assert node["node_name"] == "tools" and node["tool_count"] == 1
    assert node["tools"] == [
        {
            "name": "lookup",
            "description": "Weather of a city.",
            "source": "local",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]


def test_stop(client: httpx.Client) -> None:
    thread = uuid.uuid4().hex
    _turn(client, thread)
    data = _ok(client.post("/v1/graph/stop", json={"thread_id": thread}))
    assert data == {"status": "stopped", "ok": True, "running": False, "thread_id": thread}
    _err(client.post("/v1/graph/stop", json={"thread_id": "  "}), 422, "VALIDATION_000")


def test_state_routes(client: httpx.Client) -> None:
    thread = uuid.uuid4().hex
    assert _ok(client.get(f"/v1/threads/{thread}/state")) == {"state": None}
    r = client.put(f"/v1/threads/{thread}/state", json={"state": {"context_summary": "S"}})
    _err(r, 404, "STORAGE_NOT_FOUND_000")
    _err(client.put(f"/v1/threads/{thread}/state", json={"state": {"execution_meta": {}}}), 422)
    _turn(client, thread)
    state = _ok(client.get(f"/v1/threads/{thread}/state"))["state"]
    assert len(state["context"]) == 4 and state["execution_meta"]["status"] == "completed"
    put = _ok(client.put(f"/v1/threads/{thread}/state", json={"state": {"context_summary": "S"}}))
    assert put["state"]["context_summary"] == "S" and put["updated"] is True
    cleared = _ok(client.request("DELETE", f"/v1/threads/{thread}/state"))
    assert cleared["success"] is True and cleared["message"] == "State cleared successfully"
    assert cleared["deleted"] is True
    assert _ok(client.get(f"/v1/threads/{thread}/state")) == {"state": None}


def test_message_routes(client: httpx.Client) -> None:
    thread = uuid.uuid4().hex
    _turn(client, thread, "hi", "u1-" + thread)
    put = _ok(
        client.post(f"/v1/threads/{thread}/messages", json={"messages": [_msg("note", "n1")]})
    )
    assert put["success"] is True and put["data"] == ["n1"]
    msgs = _ok(client.get(f"/v1/threads/{thread}/messages"))["messages"]
    assert [m["message_id"] for m in msgs][-1] == "n1" and len(msgs) == 5
    page = _ok(client.get(f"/v1/threads/{thread}/messages", params={"offset": 1, "limit": 2}))
    assert [m["message_id"] for m in page["messages"]] == [m["message_id"] for m in msgs[1:3]]
    found = _ok(client.get(f"/v1/threads/{thread}/messages", params={"search": "second"}))
    assert [m["content"][0]["text"] for m in found["messages"]] == ["second: hi"]
    one = _ok(client.get(f"/v1/threads/{thread}/messages/n1"))
    assert one["message_id"] == "n1" and one["content"][0]["text"] == "note"
    deleted = _ok(client.request("DELETE", f"/v1/threads/{thread}/messages/n1"))
    assert deleted["success"] is True
    _err(client.get(f"/v1/threads/{thread}/messages/n1"), 404, "STORAGE_NOT_FOUND_000")
    _err(client.get(f"/v1/threads/{thread}/messages", params={"limit": 0}), 422)


def test_thread_routes(client: httpx.Client) -> None:
    tag = uuid.uuid4().hex[:8]
    threads = [f"{tag}-{i}" for i in range(3)]
    for t in threads:
        _turn(client, t)
    got = _ok(client.get(f"/v1/threads/{threads[0]}"))
    info = got["thread"]
    assert info["thread_id"] == threads[0] and got["thread_data"] == info
    listed = _ok(client.get("/v1/threads", params={"search": tag}))["threads"]
    assert sorted(t["thread_id"] for t in listed) == sorted(threads)
    page = _ok(client.get("/v1/threads", params={"search": tag, "offset": 1, "limit": 1}))
    assert len(page["threads"]) == 1
    gone = _ok(client.request("DELETE", f"/v1/threads/{threads[0]}"))
    assert gone == {"success": True, "message": "Thread deleted successfully", "data": True}
    _err(client.get(f"/v1/threads/{threads[0]}"), 404, "STORAGE_NOT_FOUND_000")
    _err(client.request("DELETE", f"/v1/threads/{threads[0]}"), 404)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/graph/setup"),
        ("POST", "/v1/graph/fix"),
        ("POST", "/v1/store/memories"),
        ("POST", "/v1/store/search"),
        ("PUT", "/v1/store/memories/m1"),
        ("POST", "/v1/files/upload"),
        ("GET", "/v1/files/f1/url"),
        ("GET", "/v1/config/multimodal"),
        ("GET", "/v1/observability/t1"),
    ],
)
def test_unsupported_routes_answer_501(client: httpx.Client, method: str, path: str) -> None:
    _err(client.request(method, path, json={}), 501, "NOT_IMPLEMENTED")


def _stored_threads(client: httpx.Client, needle: str) -> list[Any]:
    return list(_ok(client.get("/v1/threads", params={"search": needle}))["threads"])


def test_bad_input_is_4xx_and_writes_nothing(client: httpx.Client) -> None:
    thread = "bad-" + uuid.uuid4().hex
    url = "/v1/graph/invoke"
    good = {"messages": [_msg("x")], "config": {"thread_id": thread}}
    hdr = {"content-type": "application/json"}
    _err(client.post(url, content=b"{not json", headers=hdr), 400, "INVALID_JSON")
    _err(client.post(url, json={**good, "surprise": 1}), 422, "VALIDATION_ERROR")
    _err(client.post(url, json={**good, "messages": []}), 422, "VALIDATION_ERROR")
    _err(client.post(url, json=[good]), 422, "VALIDATION_ERROR")
    _err(client.post(url, json={**good, "recursion_limit": 0}), 422, "VALIDATION_ERROR")
    big = {**good, "messages": [_msg("y" * (11 * 1024 * 1024))]}
    _err(client.post(url, json=big), 413, "PAYLOAD_TOO_LARGE")
    ctl = {**good, "config": {"thread_id": thread + "\x07"}}
    _err(client.post(url, json=ctl), 422, "VALIDATION_000")
    bad_mid = {**good, "messages": [_msg("x", "m\x00id")]}
    _err(client.post(url, json=bad_mid), 422, "VALIDATION_000")
    _err(
        client.post(url, json={**good, "config": {"thread_id": thread, "threadId": "t"}}),
        422,
        "CONFIG_001",
    )
    _err(client.get("/v1/threads/a%07b/state"), 422, "VALIDATION_000")
    r = client.post(url, json={**good, "initial_state": {"no_such_field": 1}})
    assert r.status_code == 422 and r.json()["error"]["code"].startswith("VALIDATION"), r.text
    _err(
        client.post(url, json={**good, "config": {"thread_id": thread, "user_id": "someone"}}), 403
    )
    assert _stored_threads(client, thread) == []
    assert _ok(client.get(f"/v1/threads/{thread}/state")) == {"state": None}


def test_node_failure_is_500_envelope_and_stream_error_chunk(client: httpx.Client) -> None:
    thread = uuid.uuid4().hex
    r = client.post(
        "/v1/graph/invoke", json={"messages": [_msg("boom")], "config": {"thread_id": thread}}
    )
    err = _err(r, 500, "INTERNAL_ERROR")
    assert "internal detail" not in err["message"]  # a foreign exception's text stays in the log
    state = _ok(client.get(f"/v1/threads/{thread}/state"))["state"]
    assert state["execution_meta"]["status"] == "error"
    with client.stream(
        "POST",
        "/v1/graph/stream",
        json={"messages": [_msg("boom again")], "config": {"thread_id": thread}},
    ) as resp:
        lines = [orjson.loads(x) for x in resp.iter_lines() if x.strip()]
    assert lines[-1]["event"] == "error" and lines[-1]["data"]["error_code"] == "INTERNAL_ERROR"
    assert lines[-1]["metadata"]["event_id"].startswith(f"{len(lines)}:")


def test_stop_a_running_turn(client: httpx.Client, server: Server) -> None:
    thread = uuid.uuid4().hex
    body = {"messages": [_msg("slow one")], "config": {"thread_id": thread}}
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(httpx.post, server.url + "/v1/graph/invoke", json=body, timeout=30)
        deadline = time.monotonic() + 20
        while True:  # the first node's checkpoint says the run is under way
            state = _ok(client.get(f"/v1/threads/{thread}/state"))["state"]
            if state is not None and state["execution_meta"]["status"] == "running":
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
        data = _ok(client.post("/v1/graph/stop", json={"thread_id": thread}))
        assert data == {"status": "stopped", "ok": True, "running": True, "thread_id": thread}
        assert running.result().status_code == 200
    state = _ok(client.get(f"/v1/threads/{thread}/state"))["state"]
    assert state["execution_meta"]["status"] == "stopped"
    assert len(state["context"]) < 4  # it stopped before its last node


def test_concurrent_turns_on_one_thread_queue_up(server: Server) -> None:
    """The server's default strategy is ``enqueue``: concurrent requests on one thread each get
    their turn (none fails with a conflict) and the turns do not interleave."""
    thread = uuid.uuid4().hex
    texts = [f"q{i}" for i in range(8)]

    def send(text: str) -> int:
        body = {"messages": [_msg(text)], "config": {"thread_id": thread}}
        return httpx.post(server.url + "/v1/graph/invoke", json=body, timeout=60).status_code

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(send, texts)) == [200] * 8
    with httpx.Client(base_url=server.url) as c:
        msgs = _ok(c.get(f"/v1/threads/{thread}/messages"))["messages"]
    got = [m["content"][0]["text"] for m in msgs]
    assert len(got) == 32
    for i in range(0, 32, 4):  # each question followed by its own three answers
        q = got[i]
        assert got[i + 1 : i + 4] == [f"first: {q}", f"second: {q}", f"third: {q}"]
    assert sorted(got[::4]) == sorted(texts)


def test_list_pages_default_to_100_and_clamp_at_1000(client: httpx.Client) -> None:
    thread = uuid.uuid4().hex
    many = [_msg(f"m{i}", f"{thread}-{i}") for i in range(120)]
    _ok(client.post(f"/v1/threads/{thread}/messages", json={"messages": many}))
    assert len(_ok(client.get(f"/v1/threads/{thread}/messages"))["messages"]) == 100
    got = _ok(client.get(f"/v1/threads/{thread}/messages", params={"limit": 5000}))
    assert len(got["messages"]) == 120
