"""The documentation site builds with ``mkdocs build --strict`` and renders in a real browser.

One build per module (in a temporary directory); then:

- the error-code table holds every code of the registry, the reference shows no raw Sphinx roles
  and no internal method, ``repo_url`` is not a placeholder, every page of ``docs/`` is in nav;
- every internal link and anchor of every built page resolves;
- headless Chromium (Debian's package, driven over the DevTools protocol) loads the home page, one
  guide and one reference page from a local ``http.server``, fails on any console error,
  uncaught exception or failed request, checks that the mermaid diagrams rendered, and saves a
  PNG of each page (into ``$DOCS_SCREENSHOT_DIR`` when set, else the test's temporary folder).

``scripts/docs-deps.sh`` (run by ``scripts/test.sh``) installs Chromium and fetches mermaid.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = {
    "home": "index.html",
    "guide": "how-to/idempotent-tools/index.html",
    "reference": "reference/checkpointer/index.html",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        # No --quiet: it hides the warnings, and then a strict build's failure goes unseen.
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-8000:]
    warnings = [line for line in output.splitlines() if "WARNING" in line]
    assert not warnings, "\n".join(warnings)
    return out


def test_error_code_table_matches_the_registry(site: Path):
    from tenxgraph.core.exceptions import ERROR_CODES

    html = (site / "reference/error-codes/index.html").read_text()
    rows = re.findall(r"<tr>\s*<td><code>([A-Z_0-9]+)</code></td>", html)
    assert rows == list(ERROR_CODES)


def test_reference_is_public_and_renders_roles(site: Path):
    for page in (site / "reference").rglob("index.html"):
        html = page.read_text()
        assert not re.search(r":(class|meth|func|data|attr|mod|exc):", html), page
        for internal in ("acommit", "build_write", "aledger_put", "aledger_get", "aload"):
            assert (
                f'id="tenxgraph.storage.checkpointer.base.BaseCheckpointer.{internal}"' not in html
            )
    checkpointer = (site / "reference/checkpointer/index.html").read_text()
    for public in ("PgCheckpointer", "SqliteCheckpointer", "InMemoryCheckpointer", "aget_state"):
        assert public in checkpointer
    graph = (site / "reference/graph/index.html").read_text()
    for public in ("Agent", "ToolNode", "StateGraph", "CompiledGraph", "astream"):
        assert f">{public}<" in graph or f"{public}</code>" in graph, public


def test_config_and_nav(site: Path):
    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *a: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    assert "example.invalid" not in str(config.get("repo_url", ""))

    def pages(nav: Any) -> Iterator[str]:
        for item in nav:
            if isinstance(item, str):
                yield item
            else:
                for value in item.values():
                    yield from (pages(value) if isinstance(value, list) else [value])

    in_nav = set(pages(config["nav"]))
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk == in_nav


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        for name in ("href", "src"):
            if tag in ("a", "link", "script", "img") and a.get(name):
                self.links.append(a[name])


@functools.cache
def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text())
    return parser


def test_internal_links_resolve(site: Path):
    broken = []
    for page in site.rglob("*.html"):
        for link in _parse(page).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "data:")):
                continue
            base = site if parts.path.startswith("/") else page.parent
            target = (base / unquote(parts.path).lstrip("/")).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {link}")
            elif parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in _parse(target).ids:
                    broken.append(f"{page.relative_to(site)} -> {link} (no such anchor)")
    assert not broken, "\n".join(broken)


# -- the browser -----------------------------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _DevTools:
    """A minimal DevTools-protocol client over one page's websocket."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == self.next_id:
                assert "error" not in msg, msg
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, method: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(e.get("method") == method for e in self.events):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {method} within {timeout_s} s"
            try:
                self.events.append(json.loads(self.ws.recv(timeout=remaining)))
            except TimeoutError:
                continue

    def drain(self, quiet_s: float) -> None:
        while True:
            try:
                self.events.append(json.loads(self.ws.recv(timeout=quiet_s)))
            except TimeoutError:
                return


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Chromium is missing: run `bash scripts/docs-deps.sh` (scripts/test.sh does)"
    profile = tmp_path_factory.mktemp("chromium")
    proc = subprocess.Popen(
        [
            exe,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert time.monotonic() < deadline, "Chromium did not open its DevTools port"
            assert proc.poll() is None, "Chromium exited at start-up"
            time.sleep(0.05)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.load(resp)
        yield next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _problems(events: list[dict[str, Any]]) -> list[str]:
    found = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append(
                "console: "
                + " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            )
        elif method == "Runtime.exceptionThrown":
            found.append("exception: " + json.dumps(params["exceptionDetails"])[:500])
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            found.append(f"request failed: {params.get('errorText')}")
        elif method == "Network.responseReceived" and params["response"]["status"] >= 400:
            found.append(f"HTTP {params['response']['status']}: {params['response']['url']}")
    return found


@pytest.mark.parametrize("name", sorted(PAGES))
def test_page_renders_in_chromium(name: str, served: str, browser: str, tmp_path: Path):
    from websockets.sync.client import connect

    page = PAGES[name]
    with connect(browser, max_size=64 * 2**20) as ws:
        tools = _DevTools(ws)
        for domain in ("Page", "Runtime", "Log", "Network"):
            tools.call(f"{domain}.enable")
        tools.call(
            "Emulation.setDeviceMetricsOverride",
            width=1280,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        tools.events.clear()
        tools.call("Page.navigate", url=served + page)
        tools.wait_for("Page.loadEventFired", timeout_s=60)
        tools.drain(quiet_s=1.5)  # scripts run after load: search index, mermaid
        diagrams = tools.call(
            "Runtime.evaluate",
            expression="(() => { const d = [...document.querySelectorAll('.mermaid')];"
            # The theme swaps each <pre class="mermaid"> source for a <div> holding the SVG in a
            # closed shadow root: count the swapped, non-empty ones.
            " return [d.length, d.filter(e => e.tagName === 'DIV'"
            " && e.getBoundingClientRect().height > 40).length]; })()",
            returnByValue=True,
        )["result"]["value"]
        title = tools.call("Runtime.evaluate", expression="document.title", returnByValue=True)
        # Tables wider than the content column (the reference's parameter tables) overflow it.
        too_wide = tools.call(
            "Runtime.evaluate",
            expression="(() => { const c = document.querySelector('.md-content__inner');"
            " const right = c.getBoundingClientRect().right + 1;"
            " return [...c.querySelectorAll('table')].filter(t =>"
            " t.getBoundingClientRect().right > right || t.scrollWidth > t.clientWidth + 1)"
            ".length; })()",
            returnByValue=True,
        )["result"]["value"]
        shot = tools.call("Page.captureScreenshot", format="png")["data"]
    out_dir = Path(os.environ.get("DOCS_SCREENSHOT_DIR") or tmp_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    png = base64.b64decode(shot)
    (out_dir / f"{name}.png").write_bytes(png)
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert not _problems(tools.events), _problems(tools.events)
    assert "tenxgraph" in title["result"]["value"]
    assert too_wide == 0, f"{too_wide} tables wider than the content column"
    total, rendered = diagrams
    assert total == rendered, f"{rendered} of {total} mermaid diagrams rendered"
    if name in ("home", "guide"):
        assert total >= 1


# Each public module and the reference page that documents it.
REFERENCE_PAGES = {
    "tenxgraph.core.graph": "graph",
    "tenxgraph.core.state": "state",
    "tenxgraph.core.state.reducers": "reducers",
    "tenxgraph.core.exceptions": "exceptions",
    "tenxgraph.storage.checkpointer": "checkpointer",
    "tenxgraph.utils": "utils",
    "tenxgraph.models": "models",
}
# Names of a module's __all__ documented on another reference page (re-exports).
DOCUMENTED_ELSEWHERE = {
    ("tenxgraph.core.state", "add_messages"): "reducers",
    ("tenxgraph.core.state", "append_items"): "reducers",
    ("tenxgraph.core.state", "replace_messages"): "reducers",
    ("tenxgraph.core.state", "replace_value"): "reducers",
    ("tenxgraph.core.state", "StreamChunk"): "graph",
    ("tenxgraph.core.state", "StreamEvent"): "graph",
    ("tenxgraph.core.state.reducers", "Message"): "state",
    ("tenxgraph.core.state.reducers", "MessageList"): "state",
    ("tenxgraph.utils", "add_messages"): "reducers",
    ("tenxgraph.utils", "append_items"): "reducers",
    ("tenxgraph.utils", "replace_messages"): "reducers",
    ("tenxgraph.utils", "replace_value"): "reducers",
}
# Names with no heading at all, and why.
NOT_HEADED = {
    ("tenxgraph.core.exceptions", "ERROR_CODES"): "rendered as the Error codes page's table",
}


def _documented_names(site: Path, page: str) -> set[str]:
    """Names that have a top-level heading (a module member, not a method) on a reference page."""
    import importlib

    html = (site / "reference" / page / "index.html").read_text()
    names = set()
    for anchor in re.findall(r'<h[1-6] id="([\w.]+)" class="doc doc-heading"', html):
        parent, _, name = anchor.rpartition(".")
        try:
            importlib.import_module(parent)
        except ImportError:
            continue  # parent is a class: a method or attribute heading
        names.add(name)
    return names


def test_reference_documents_every_public_name(site: Path):
    import importlib

    headed = {page: _documented_names(site, page) for page in set(REFERENCE_PAGES.values())}
    missing = []
    for module, page in REFERENCE_PAGES.items():
        for name in importlib.import_module(module).__all__:
            if (module, name) in NOT_HEADED:
                continue
            where = DOCUMENTED_ELSEWHERE.get((module, name), page)
            if name not in headed[where]:
                missing.append(f"{module}.{name} (expected on reference/{where})")
    assert not missing, missing


def _error_table(site: Path) -> dict[str, str]:
    html = (site / "reference/error-codes/index.html").read_text()
    rows = re.findall(
        r"<tr>\s*<td><code>([A-Z_0-9]+)</code></td>\s*<td><code>(\w+)</code></td>", html
    )
    return dict(rows)


def test_error_code_table_names_the_raising_class(site: Path):
    from tenxgraph.core.graph import StateGraph

    table = _error_table(site)
    assert table["GRAPH_000"] == "GraphError"  # shares default_code with its base TenxGraphError
    assert table["GRAPH_ROUTING_001"] == "GraphError"
    assert table["GRAPH_010"] == "UnsupportedArgumentError"
    assert table["STORAGE_FORBIDDEN_001"] == "StorageError"
    assert table["STORAGE_SCHEMA_002"] == "SchemaMissingError"

    # What the runtime really raises matches the table.
    raised = []
    with pytest.raises(Exception) as no_entry:
        StateGraph().compile()
    raised.append(no_entry.value)
    with pytest.raises(Exception) as not_provided:
        StateGraph(publisher=object())
    raised.append(not_provided.value)
    with pytest.raises(Exception) as unknown:
        StateGraph(publishr=None)
    raised.append(unknown.value)
    for err in raised:
        assert type(err).__name__ == table[err.error_code], (err.error_code, type(err))


def test_reference_points_only_at_what_users_can_read(site: Path):
    # DESIGN.md is the team's internal contract, not shipped; PostgresStore is internal.
    for page in (site / "reference").rglob("index.html"):
        text = re.sub(r"<[^>]+>", "", page.read_text())
        assert "DESIGN" not in text, page
        assert "see PostgresStore" not in text.replace("``", ""), page
