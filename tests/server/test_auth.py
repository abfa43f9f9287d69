"""Auth over HTTP: JWT with a shared secret (from the config's env file) and a custom
``BaseAuth`` class path; user B cannot read, list, stop, write or delete user A's threads."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest

from ._harness import Server, make_folder

SECRET = "test-secret-" + uuid.uuid4().hex

CUSTOM_AUTH = '''
from tenxgraph.server import BaseAuth


class HeaderAuth(BaseAuth):
    """Trusts an X-User header (a test double of a gateway that authenticated the caller)."""

    def authenticate(self, request, response, credential):
        user = request.headers.get("x-user")
        if not user:
            raise PermissionError("no X-User header")
        return {"user_id": user, "role": "tester"}
'''


@pytest.fixture(scope="module")
def jwt_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("auth")
    config = make_folder(
        folder,
        auth="jwt",
        extra_files={".env": f"JWT_SECRET_KEY={SECRET}\nJWT_ALGORITHM=HS256\n"},
    )
    text = config.read_text().replace("}", ', "env": ".env"}')
    config.write_text(text)
    srv = Server(config, {"TXG_STORE": "sqlite", "TXG_DB": str(folder / "auth.sqlite")})
    try:
        yield srv
    finally:
        srv.stop()


def _token(user: str, **claims: Any) -> dict[str, str]:
    payload = {"user_id": user, "exp": int(time.time()) + 600, **claims}
    return {"Authorization": "Bearer " + jwt.encode(payload, SECRET, algorithm="HS256")}


def _code(r: httpx.Response) -> str:
    return str(r.json()["error"]["code"])


def test_jwt_refuses_missing_bad_and_expired_tokens(jwt_server: Server) -> None:
    with httpx.Client(base_url=jwt_server.url) as c:
        assert "authentication is off" not in jwt_server.output()
        r = c.get("/v1/threads")
        assert r.status_code == 401 and _code(r) == "REVOKED_TOKEN"
        r = c.get("/v1/threads", headers={"Authorization": "Bearer not-a-jwt"})
        assert r.status_code == 401 and _code(r) == "INVALID_TOKEN"
        forged = jwt.encode(
            {"user_id": "a"}, "other-secret-of-32-bytes-or-more!", algorithm="HS256"
        )
        r = c.get("/v1/threads", headers={"Authorization": f"Bearer {forged}"})
        assert r.status_code == 401 and _code(r) == "INVALID_TOKEN"
        r = c.get("/v1/threads", headers=_token("a", exp=int(time.time()) - 10))
        assert r.status_code == 401 and _code(r) == "EXPIRED_TOKEN"
        r = c.get(
            "/v1/threads", headers={"Authorization": "Bearer " + jwt.encode({"sub": "a"}, SECRET)}
        )
        assert r.status_code == 401 and _code(r) == "INVALID_TOKEN"


def test_user_b_cannot_touch_user_a_threads(jwt_server: Server) -> None:
    a, b = _token("alice"), _token("bob")
    thread = "private-" + uuid.uuid4().hex
    msg = {"role": "user", "content": "secret plan", "message_id": uuid.uuid4().hex}
    with httpx.Client(base_url=jwt_server.url, timeout=30) as c:
        r = c.post(
            "/v1/graph/invoke", json={"messages": [msg], "config": {"thread_id": thread}}, headers=a
        )
        assert r.status_code == 200, r.text
        before = c.get(f"/v1/threads/{thread}/state", headers=a).json()["data"]["state"]
        assert len(before["context"]) == 4
        # reads: as if the thread did not exist
        assert c.get(f"/v1/threads/{thread}/state", headers=b).json()["data"] == {"state": None}
        assert c.get(f"/v1/threads/{thread}", headers=b).status_code == 404
        assert c.get(f"/v1/threads/{thread}/messages", headers=b).json()["data"] == {"messages": []}
        mid = before["context"][0]["message_id"]
        assert c.get(f"/v1/threads/{thread}/messages/{mid}", headers=b).status_code == 404
        listed = c.get("/v1/threads", headers=b).json()["data"]["threads"]
        assert thread not in [t["thread_id"] for t in listed]
        assert thread in [
            t["thread_id"] for t in c.get("/v1/threads", headers=a).json()["data"]["threads"]
        ]
        # writes, stop and deletes: refused, nothing revealed
        other = {"role": "user", "content": "hijack", "message_id": uuid.uuid4().hex}
        for r in (
            c.post(
                "/v1/graph/invoke",
                json={"messages": [other], "config": {"thread_id": thread}},
                headers=b,
            ),
            c.post("/v1/graph/stop", json={"thread_id": thread}, headers=b),
            c.put(
                f"/v1/threads/{thread}/state", json={"state": {"context_summary": "x"}}, headers=b
            ),
            c.post(f"/v1/threads/{thread}/messages", json={"messages": [other]}, headers=b),
            c.request("DELETE", f"/v1/threads/{thread}/messages/{mid}", headers=b),
            c.request("DELETE", f"/v1/threads/{thread}/state", headers=b),
            c.request("DELETE", f"/v1/threads/{thread}", headers=b),
        ):
            assert r.status_code in (403, 404), (r.request.method, r.request.url, r.text)
            assert "alice" not in r.text
        # the client cannot claim another user in the config either
        r = c.post(
            "/v1/graph/invoke",
            json={"messages": [other], "config": {"thread_id": thread, "user_id": "alice"}},
            headers=b,
        )
        assert r.status_code == 403
        after = c.get(f"/v1/threads/{thread}/state", headers=a).json()["data"]["state"]
        assert after["context"] == before["context"]
        assert after["context_summary"] == before["context_summary"]


def test_custom_auth_class_path(tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("custom")
    config = make_folder(
        folder,
        auth={"method": "custom", "path": "myauth:HeaderAuth"},
        extra_files={"myauth.py": CUSTOM_AUTH},
    )
    srv = Server(config, {"TXG_STORE": "memory"})
    try:
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            r = c.get("/v1/threads")
            assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHORIZED"
            msg = {"role": "user", "content": "hi", "message_id": "m1"}
            r = c.post(
                "/v1/graph/invoke",
                json={"messages": [msg], "config": {"thread_id": "t"}},
                headers={"x-user": "carol"},
            )
            assert r.status_code == 200
            assert [
                t["thread_id"]
                for t in c.get("/v1/threads", headers={"x-user": "carol"}).json()["data"]["threads"]
            ] == ["t"]
            assert c.get("/v1/threads", headers={"x-user": "dave"}).json()["data"]["threads"] == []
    finally:
        srv.stop()
