"""``fetch_url`` against a local HTTP server (127.0.0.1) and ``google_web_search`` against a
local Gemini wire server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tenxgraph.core.exceptions import ConfigError, ValidationError
from tenxgraph.core.graph import Agent, ToolNode
from tenxgraph.prebuilt.tools import fetch_url, google_web_search, make_fetch_url
from tests.providers._wire_servers import Answer, GeminiServer

pytestmark = pytest.mark.anyio

PAGE = (
    b"<html><head><title>T</title><style>p{}</style></head><body>"
    b"<script>var x = 1;</script><h1>Tides</h1><p>The moon &amp; the sun.</p></body></html>"
)


class _Site:
    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/page":
                    self._send(200, PAGE, "text/html; charset=utf-8")
                elif self.path == "/big":
                    self._send(200, b"a" * 50_000, "text/plain")
                elif self.path == "/missing":
                    self._send(404, b"no such page", "text/plain")
                elif self.path.startswith("/hop"):
                    n = int(self.path[4:] or 0)
                    self.send_response(302)
                    self.send_header("Location", f"/hop{n + 1}" if n < 9 else "/page")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif self.path == "/slow":
                    time.sleep(1.5)
                    self._send(200, b"late", "text/plain")

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def site() -> Iterator[_Site]:
    s = _Site()
    yield s
    s.close()


local_fetch = make_fetch_url(allow_private_hosts=True, max_body_bytes=10_000, max_redirects=3)


async def test_fetch_url_returns_the_visible_text(site: _Site) -> None:
    out = json.loads(await local_fetch(site.url + "/page"))
    assert out == {
        "url": site.url + "/page",
        "status_code": 200,
        "content_type": "text/html; charset=utf-8",
        "content": "Tides The moon & the sun.",
        "truncated": False,
    }
    short = json.loads(await local_fetch(site.url + "/page", max_chars=5))
    assert short["content"] == "Tides" and short["truncated"] is True


async def test_fetch_url_limits_size_and_reports_statuses(site: _Site) -> None:
    big = json.loads(await local_fetch(site.url + "/big", max_chars=100_000))
    assert len(big["content"]) == 10_000 and big["truncated"] is True
    missing = json.loads(await local_fetch(site.url + "/missing"))
    assert missing["status_code"] == 404 and missing["content"] == "no such page"


async def test_fetch_url_follows_a_few_redirects_only(site: _Site) -> None:
    ok = json.loads(await local_fetch(site.url + "/hop7"))
    assert ok["url"] == site.url + "/page" and ok["status_code"] == 200
    loop = json.loads(await local_fetch(site.url + "/hop0"))
    assert loop == {"url": site.url + "/hop4", "error": "more than 3 redirects"}


async def test_fetch_url_errors(site: _Site) -> None:
    slow = json.loads(await local_fetch(site.url + "/slow", timeout=0.1))  # clamped to 1 s
    assert slow["error"] == "timed out after 1 s"
    site.close()
    gone = json.loads(await local_fetch(site.url + "/page"))
    assert gone["error"].startswith("ConnectError")
    for url in ("ftp://example.com/x", "file:///etc/passwd", "http:///nohost"):
        with pytest.raises(ValidationError) as info:
            await local_fetch(url)
        assert info.value.error_code == "VALIDATION_000"
    with pytest.raises(ValidationError):
        await local_fetch(site.url, max_chars=0)
    with pytest.raises(ConfigError):
        make_fetch_url(max_body_bytes=0)


async def test_the_default_fetch_url_refuses_private_addresses(site: _Site) -> None:
    for url in (site.url + "/page", "http://localhost:9/", "http://10.0.0.1/", "http://[::1]/"):
        with pytest.raises(ValidationError) as info:
            await fetch_url(url)
        assert info.value.context["reason"] == "private_address"


def test_web_tools_are_offered_with_their_parameters() -> None:
    specs = {
        t["function"]["name"]: t["function"]["parameters"]
        for t in ToolNode([fetch_url, google_web_search]).all_tools_sync()
    }
    assert set(specs["fetch_url"]["properties"]) == {"url", "timeout", "max_chars"}
    assert specs["fetch_url"]["required"] == ["url"]
    assert specs["google_web_search"]["required"] == ["query"]
    assert Agent(model="gpt-4o-mini", api_key="k", tool_node=ToolNode([fetch_url]))


async def test_google_web_search_asks_gemini_with_search_grounding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv = GeminiServer()
    try:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", srv.url)
        monkeypatch.setenv("GOOGLE_API_KEY", "k")
        monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
        grounding = {
            "webSearchQueries": ["moon tides"],
            "groundingChunks": [{"web": {"uri": "https://example.org/t", "title": "Tides"}}],
        }
        srv.answers.append(Answer(text="The moon pulls the sea.", grounding=grounding))
        out = json.loads(await google_web_search("why tides?", max_chars=8))
        assert out["content"] == "The moon" and out["truncated"] is True
        meta = out["grounding_metadata"]
        assert meta["web_search_queries"] == ["moon tides"]
        assert meta["grounding_chunks"][0]["web"]["uri"] == "https://example.org/t"
        body = srv.requests[0]
        assert body["tools"] == [{"googleSearch": {}}]
        assert body["contents"] == [{"role": "user", "parts": [{"text": "why tides?"}]}]
        assert srv.paths[0].endswith("/models/gemini-2.5-flash:generateContent")
        with pytest.raises(ValidationError):
            await google_web_search("  ")
    finally:
        srv.close()
