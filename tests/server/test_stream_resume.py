"""A stream broken because its server process was SIGKILLed is resumed on a second process on
the same Postgres: the client re-sends the request with ``Last-Event-ID`` and gets the rest of
the turn, no message chunk lost or repeated (docs/how-to/serve.md, "Resuming a stream")."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import PG_DSN

from ._harness import Server, make_folder

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(scope="module")
def servers(
    pg_schema_module: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Server]]:
    config = make_folder(tmp_path_factory.mktemp("resume"))
    env = {
        "TXG_STORE": "postgres",
        "TXG_DSN": PG_DSN,
        "TXG_SCHEMA": pg_schema_module,
        "TXG_SLOW_S": "1.0",
        "TXG_LEASE_TTL_S": "2.0",
    }
    started = [Server(config, env, wait=False) for _ in range(3)]
    for s in started:  # started together, waited for together
        s.wait_ready()
    try:
        yield started
    finally:
        for s in started:
            s.stop()


def _body(thread: str, mid: str, text: str) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": text, "message_id": mid}],
        "config": {"thread_id": thread},
    }


def _message_ids(lines: list[dict[str, Any]]) -> list[str]:
    return [
        c["message"]["message_id"]
        for c in lines
        if c["event"] == "message" and not c["message"]["delta"]
    ]


def test_stream_resumes_on_another_process_after_sigkill(servers: list[Server]) -> None:
    first, second = servers[0], servers[1]
    thread, mid = "resume-" + uuid.uuid4().hex, uuid.uuid4().hex
    body = _body(thread, mid, "slow question")
    seen: list[dict[str, Any]] = []
    with httpx.Client(base_url=first.url, timeout=30) as c:
        with c.stream("POST", "/v1/graph/stream", json=body) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if not line.strip():
                    continue
                seen.append(orjson.loads(line))
                texts = [
                    m["message"]["content"][0]["text"] for m in seen if m["event"] == "message"
                ]
                if "first: slow question" in texts:
                    break  # the node "second" is running now (it sleeps 1 s): kill the process
            first.kill()
    cursor = seen[-1]["metadata"]["event_id"]
    with httpx.Client(base_url=second.url, timeout=60) as c:
        with c.stream(
            "POST", "/v1/graph/stream", json=body, headers={"Last-Event-ID": cursor}
        ) as r:
            assert r.status_code == 200
            rest = [orjson.loads(line) for line in r.iter_lines() if line.strip()]
        state = c.get(f"/v1/threads/{thread}/state").json()["data"]["state"]
    stored = [m["message_id"] for m in state["context"]]
    got = _message_ids(seen) + _message_ids(rest)
    assert got == stored, (got, stored)  # every message once, in order, none lost
    assert len(stored) == 4 and stored[0] == mid
    assert [m["content"][0]["text"] for m in state["context"][1:]] == [
        "first: slow question",
        "second: slow question",
        "third: slow question",
    ]
    assert rest[-1]["event"] == "state"
    seqs = [int(c["metadata"]["event_id"].split(":")[0]) for c in rest]
    assert seqs == list(
        range(int(cursor.split(":")[0]) + 1, int(cursor.split(":")[0]) + 1 + len(rest))
    )


def test_resume_of_a_finished_turn_sends_only_what_follows_the_cursor(
    servers: list[Server],
) -> None:
    live = servers[1]
    thread, mid = "done-" + uuid.uuid4().hex, uuid.uuid4().hex
    body = _body(thread, mid, "quick")
    with httpx.Client(base_url=live.url, timeout=30) as c:
        with c.stream("POST", "/v1/graph/stream", json=body) as r:
            full = [orjson.loads(line) for line in r.iter_lines() if line.strip()]
        ids = _message_ids(full)
        cursor = next(
            x["metadata"]["event_id"]
            for x in full
            if x["event"] == "message" and x["message"]["message_id"] == ids[1]
        )
        with c.stream(
            "POST", "/v1/graph/stream", json=body, headers={"Last-Event-ID": cursor}
        ) as r:
            rest = [orjson.loads(line) for line in r.iter_lines() if line.strip()]
        assert _message_ids(rest) == ids[2:]
        # a cursor naming no message of this turn is refused before anything runs
        r = c.post("/v1/graph/stream", json=body, headers={"Last-Event-ID": "3:nope"})
        assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION_000"
        r = c.post("/v1/graph/stream", json=body, headers={"Last-Event-ID": "garbage"})
        assert r.status_code == 422


def test_resume_after_the_client_dropped_the_connection(servers: list[Server]) -> None:
    """The server lives on; the client's connection broke mid-run. The run goes on to its end
    unread (the app's task group holds it), and a resume gets the rest of the turn once."""
    live = servers[1]
    thread, mid = "drop-" + uuid.uuid4().hex, uuid.uuid4().hex
    body = _body(thread, mid, "slow drop")
    seen: list[dict[str, Any]] = []
    with httpx.Client(base_url=live.url, timeout=30) as c:
        with c.stream("POST", "/v1/graph/stream", json=body) as r:
            for line in r.iter_lines():
                if line.strip():
                    seen.append(orjson.loads(line))
                if len(_message_ids(seen)) == 2:
                    break  # close the connection mid-run
        deadline = time.monotonic() + 20
        while True:  # nobody asks for it: the turn finishes anyway
            state = c.get(f"/v1/threads/{thread}/state").json()["data"]["state"]
            if state["execution_meta"]["status"] == "completed":
                break
            assert time.monotonic() < deadline, state["execution_meta"]
            time.sleep(0.1)
        assert len(state["context"]) == 4
    cursor = seen[-1]["metadata"]["event_id"]
    with httpx.Client(base_url=live.url, timeout=60) as c:
        with c.stream(
            "POST", "/v1/graph/stream", json=body, headers={"Last-Event-ID": cursor}
        ) as r:
            rest = [orjson.loads(line) for line in r.iter_lines() if line.strip()]
        state = c.get(f"/v1/threads/{thread}/state").json()["data"]["state"]
    stored = [m["message_id"] for m in state["context"]]
    assert _message_ids(seen) + _message_ids(rest) == stored and len(stored) == 4


def test_resume_on_another_instance_while_the_run_goes_on(servers: list[Server]) -> None:
    """The client's connection to instance C broke; it resumes on instance B at once, while C
    still runs the turn: B waits for C's run (enqueue) and sends the rest, once."""
    holder, other = servers[2], servers[1]
    thread, mid = "live-" + uuid.uuid4().hex, uuid.uuid4().hex
    body = _body(thread, mid, "slow live")
    seen: list[dict[str, Any]] = []
    with httpx.Client(base_url=holder.url, timeout=30) as c:
        with c.stream("POST", "/v1/graph/stream", json=body) as r:
            for line in r.iter_lines():
                if line.strip():
                    seen.append(orjson.loads(line))
                if len(_message_ids(seen)) == 2:
                    break
    cursor = seen[-1]["metadata"]["event_id"]
    with httpx.Client(base_url=other.url, timeout=60) as c:
        with c.stream(
            "POST", "/v1/graph/stream", json=body, headers={"Last-Event-ID": cursor}
        ) as r:
            rest = [orjson.loads(line) for line in r.iter_lines() if line.strip()]
        state = c.get(f"/v1/threads/{thread}/state").json()["data"]["state"]
    stored = [m["message_id"] for m in state["context"]]
    assert _message_ids(seen) + _message_ids(rest) == stored and len(stored) == 4
    assert state["execution_meta"]["status"] == "completed"
