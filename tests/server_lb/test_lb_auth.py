"""User isolation over real HTTP, through HAProxy and two ``tenxgraph serve`` processes with JWT
auth (a shared secret): user B's token cannot read, list, stop, change or delete user A's
threads, whichever instance answers; A still can, and A's run is not stopped by B.

Tokens are HS256 JWTs carrying ``user_id`` (10xGraph's JWT backend reads that claim), signed here
with the standard library.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from _lb_chaos import chaos_env
from _lb_cluster import Cluster, haproxy_path

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

SECRET = "test-secret-of-the-lb-auth-test-0123456789"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(user_id: str, secret: str = SECRET) -> str:
    """An HS256 JWT ``{"user_id": user_id}`` valid for an hour."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"user_id": user_id, "exp": int(time.time()) + 3600}
    payload = _b64(json.dumps(claims).encode())
    sig = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(sig)}"


def _auth(user_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(user_id)}"}


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory,
    pg_dsn_module: str,
    pg_schema_module: str,
    redis_url_module: str,
    redis_prefix_module: str,
) -> Any:
    if haproxy_path() is None:
        pytest.fail("haproxy is not installed; run scripts/services.sh", pytrace=False)
    env = chaos_env(pg_dsn_module, pg_schema_module, redis_url_module, redis_prefix_module)
    env.update({"LB_NODE_S": "0.01", "JWT_SECRET_KEY": SECRET, "JWT_ALGORITHM": "HS256"})
    with Cluster(
        tmp_path_factory.mktemp("auth"), "_lb_graph:make_graph", env=env, n=2, auth="jwt"
    ) as c:
        yield c


def _turn(tid: str, mid: str, text: str) -> dict[str, Any]:
    return {
        "messages": [{"message_id": mid, "role": "user", "content": text}],
        "config": {"thread_id": tid},
    }


def _hidden(r: httpx.Response, secret: str) -> None:
    """B's answer reveals nothing of A's thread and is a clean refusal or an empty answer."""
    assert r.status_code < 500, r.text
    assert secret not in r.text, r.text


# 10xGraph's server answers a missing or bad token with 403 (docs/how-to/serve.md)
def test_no_token_is_refused(cluster: Cluster) -> None:
    r = httpx.get(cluster.url + "/v1/threads", timeout=10)
    assert r.status_code == 403 and r.json()["error"]["code"] == "REVOKED_TOKEN", r.text
    r = httpx.post(cluster.url + "/v1/graph/invoke", json=_turn("x", "x1", "hi"), timeout=10)
    assert r.status_code == 403 and r.json()["error"]["code"] == "REVOKED_TOKEN", r.text


def test_a_token_signed_with_another_secret_is_refused(cluster: Cluster) -> None:
    bad = {"Authorization": f"Bearer {token('alice', secret='not-the-secret')}"}
    r = httpx.get(cluster.url + "/v1/threads", headers=bad, timeout=10)
    assert r.status_code == 403 and r.json()["error"]["code"] == "INVALID_TOKEN", r.text


def test_user_b_cannot_read_list_change_or_delete_user_a_threads(cluster: Cluster) -> None:
    a, b = _auth("alice"), _auth("bob")
    tid, secret = "auth-a-1", "alice-secret-text-7f3c"
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        r = http.post("/v1/graph/invoke", json=_turn(tid, "a-m1", secret), headers=a)
        assert r.status_code == 200, r.text
        assert secret in r.text

        # Read, on both instances (round robin): state, messages, one message, the thread.
        for _ in range(2):
            _hidden(http.get(f"/v1/threads/{tid}/state", headers=b), secret)
            _hidden(http.get(f"/v1/threads/{tid}/messages", headers=b), secret)
            _hidden(http.get(f"/v1/threads/{tid}/messages/a-m1", headers=b), secret)
            _hidden(http.get(f"/v1/threads/{tid}", headers=b), secret)
        # List: B's listing does not show A's thread; A's does.
        r = http.get("/v1/threads", headers=b)
        assert r.status_code == 200, r.text
        assert tid not in r.text and secret not in r.text
        r = http.get("/v1/threads", headers=a)
        assert r.status_code == 200 and tid in r.text, r.text

        # Change: B cannot add a message or replace the state (refused), nor delete a message
        # or the thread (refused, or answered as for a thread that does not exist: nothing
        # deleted; A's thread is checked below).
        for r in (
            http.post(
                f"/v1/threads/{tid}/messages",
                json={"messages": [{"role": "user", "content": "from bob"}]},
                headers=b,
            ),
            http.put(f"/v1/threads/{tid}/state", json={"state": {"context": []}}, headers=b),
        ):
            _hidden(r, secret)
            assert r.status_code >= 400, r.text
        for r in (
            http.delete(f"/v1/threads/{tid}/messages/a-m1", headers=b),
            http.delete(f"/v1/threads/{tid}", headers=b),
        ):
            _hidden(r, secret)
            assert r.status_code >= 400 or r.json()["data"].get("data") is False, r.text
        # Nor write into it by sending a turn on A's thread id.
        r = http.post("/v1/graph/invoke", json=_turn(tid, "b-m1", "bob was here"), headers=b)
        _hidden(r, secret)
        assert r.status_code >= 400, r.text

        # A's thread is intact, on both instances.
        for _ in range(2):
            r = http.get(f"/v1/threads/{tid}/state", headers=a)
            assert r.status_code == 200, r.text
            assert secret in r.text and "from bob" not in r.text and "bob was here" not in r.text
            assert f"answer:{secret}" in r.text
            r = http.get(f"/v1/threads/{tid}/messages/a-m1", headers=a)
            assert r.status_code == 200 and secret in r.text, r.text


def test_user_b_cannot_stop_user_a_run(cluster: Cluster, tmp_path: Path) -> None:
    a, b = _auth("alice"), _auth("bob")
    tid = "auth-a-stop"
    # A "slow:" turn: each node sleeps 0.5 s, so B's stop requests reach the servers while
    # A's run is going (a stop honoured by the runtime would end it after its first node).
    result: dict[str, Any] = {}

    def run_a() -> None:
        r = httpx.post(
            cluster.url + "/v1/graph/invoke",
            json=_turn(tid, "a-s1", "slow: long turn"),
            headers=a,
            timeout=60,
        )
        result["status"] = r.status_code
        result["text"] = r.text

    t = threading.Thread(target=run_a)
    t.start()
    stops = []
    time.sleep(0.1)
    deadline = time.monotonic() + 0.6
    while t.is_alive() and time.monotonic() < deadline:
        stops.append(
            httpx.post(
                cluster.url + "/v1/graph/stop",
                json={"thread_id": tid, "config": {}},
                headers=b,
                timeout=10,
            )
        )
        time.sleep(0.05)
    t.join(60)
    assert stops, "A's run ended before B's stop could be sent"
    for r in stops:
        assert r.status_code < 500, r.text
    assert result["status"] == 200, result
    r = httpx.get(cluster.url + f"/v1/threads/{tid}/state", headers=a, timeout=10)
    assert r.status_code == 200, r.text
    assert "answer:slow: long turn" in r.text, r.text
    assert "stopped" not in json.dumps(r.json().get("data", {}).get("execution_meta", {}))
