"""Start ``tenxgraph serve`` in a subprocess on a free port, from a config file in a fresh
folder, and talk to it over real HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

GRAPH_MODULE = '''
import os

import anyio

from tenxgraph.core.graph import StateGraph, ToolNode
from tenxgraph.core.state import AgentState
from tenxgraph.utils import END


def lookup(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def make_node(name):
    async def node(state: AgentState) -> str:
        text = state.context[-1].text() if state.context else ""
        for m in reversed(state.context):
            if m.role == "user":
                text = m.text()
                break
        if text.startswith("boom") and name == "second":
            raise RuntimeError("boom: internal detail")
        if text.startswith("slow"):
            await anyio.sleep(float(os.environ.get("TXG_SLOW_S", "0.6")))
        return f"{name}: {text}"

    return node


def route(state: AgentState) -> str:
    return END


def _checkpointer():
    kind = os.environ.get("TXG_STORE", "memory")
    if kind == "postgres":
        from tenxgraph.storage.checkpointer import PgCheckpointer

        return PgCheckpointer(
            postgres_dsn=os.environ["TXG_DSN"],
            schema=os.environ["TXG_SCHEMA"],
            lease_ttl_s=float(os.environ.get("TXG_LEASE_TTL_S", "2.0")),
            lease_renew_s=0.5,
        )
    if kind == "sqlite":
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        return SqliteCheckpointer(os.environ["TXG_DB"])
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer

    return InMemoryCheckpointer()


builder = StateGraph(AgentState)
for n in ("first", "second", "third"):
    builder.add_node(n, make_node(n))
builder.add_node("tools", ToolNode([lookup]))
builder.set_entry_point("first")
builder.add_edge("first", "second")
builder.add_edge("second", "third")
builder.add_conditional_edges("third", route, {"tools": "tools", END: END})
builder.add_edge("tools", END)
app = builder.compile(checkpointer=_checkpointer())
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_folder(
    folder: Path, auth: object = None, extra_files: dict[str, str] | None = None
) -> Path:
    """A project folder with ``mygraph.py`` and ``10xgraph.json``; returns the config path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mygraph.py").write_text(GRAPH_MODULE)
    for name, text in (extra_files or {}).items():
        (folder / name).write_text(text)
    config: dict[str, object] = {"agent": "mygraph:app"}
    if auth is not None:
        config["auth"] = auth
    path = folder / "10xgraph.json"
    path.write_text(json.dumps(config))
    return path


class Server:
    """One ``tenxgraph serve`` process."""

    def __init__(
        self, config: Path, env: dict[str, str], extra_args: list[str] | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = config.parent / f"server-{self.port}.log"
        full_env = {**os.environ, **env}
        full_env.pop(  # the test process's own telemetry settings are not the server's
            "OTEL_TRACES_EXPORTER", None
        )
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tenxgraph.cli",
                "serve",
                "--config",
                str(config),
                "--port",
                str(self.port),
                *(extra_args or []),
            ],
            cwd=str(config.parent),
            env=full_env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()}")
            try:
                if httpx.get(self.url + "/ping", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"server did not start: {self.log.read_text()}")
            time.sleep(0.1)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
