"""A real HAProxy in front of N ``tenxgraph serve`` processes, for tests and benchmarks.

Everything runs on 127.0.0.1 on free ports, with its files (config file, graph module's
settings, HAProxy config, logs) in one folder. HAProxy balances round robin and health-checks
each server with ``GET /ping`` every 300 ms (down after 2 failures, up after 1 success); a
connection refused by a dead server is retried on another one (``option redispatch``), which is
safe for any method because the request never left HAProxy. A request already sent to a server
that then dies is not retried by HAProxy: the client sees the failure and retries (the 10xGraph
client loop of ``docs/idempotent-turns.md``).

Used by ``tests/server_lb`` (bounded runs) and ``benchmarks/server_chaos.py`` /
``benchmarks/server_overhead.py`` (full size), which put this folder on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def haproxy_path() -> str | None:
    """The ``haproxy`` binary (``scripts/services.sh`` installs it), or ``None``."""
    return shutil.which("haproxy") or (
        "/usr/sbin/haproxy" if os.access("/usr/sbin/haproxy", os.X_OK) else None
    )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def haproxy_config(front_port: int, server_ports: Sequence[int], timeout_s: float = 120) -> str:
    """The HAProxy configuration of the deployment how-to (docs/how-to/deploy-load-balancer.md),
    on loopback ports."""
    servers = "\n".join(f"    server s{i} 127.0.0.1:{p} check" for i, p in enumerate(server_ports))
    t = int(timeout_s * 1000)
    return f"""\
global
    maxconn 4096

defaults
    mode http
    option http-server-close
    timeout connect 1s
    timeout client {t}ms
    timeout server {t}ms
    timeout http-keep-alive 5s
    retries 3
    option redispatch 1

frontend api
    bind 127.0.0.1:{front_port}
    default_backend tenxgraph

backend tenxgraph
    balance roundrobin
    option httpchk
    http-check send meth GET uri /ping
    http-check expect status 200
    default-server inter 300ms fall 2 rise 1
{servers}
"""


def wait_http_ok(url: str, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``url`` until it answers 200.

    Raises:
        RuntimeError: not answering after ``timeout_s`` seconds, or ``proc`` exited first.
    """
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            r = httpx.get(url, timeout=1.0)
            if r.status_code == 200:
                return
            last = r.status_code
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.05)
    raise RuntimeError(f"{url} not answering after {timeout_s} s (last: {last!r})")


@dataclass
class Cluster:
    """N ``tenxgraph serve`` processes behind one HAProxy.

    Args:
        folder: where the config file, HAProxy's config and the logs go (exists, writable).
        agent: the graph's ``"module:attr"``, importable with ``pythonpath`` first.
        env: environment of the server processes (added to this process's).
        n: number of server processes.
        pythonpath: folders put first on the servers' ``PYTHONPATH``.
        auth: the config file's ``auth`` value (``None``: no authentication).
        serve_args: extra arguments of ``tenxgraph serve`` (``["--workers", "2"]``).
    """

    folder: Path
    agent: str
    env: dict[str, str] = field(default_factory=dict)
    n: int = 3
    pythonpath: Sequence[Path] = (HERE,)
    auth: object = None
    serve_args: Sequence[str] = ()
    ports: list[int] = field(default_factory=list)
    front_port: int = 0
    procs: list[subprocess.Popen[bytes] | None] = field(default_factory=list)
    haproxy: subprocess.Popen[bytes] | None = None
    kills: int = 0

    @property
    def url(self) -> str:
        """HAProxy's address (``http://127.0.0.1:PORT``)."""
        return f"http://127.0.0.1:{self.front_port}"

    def server_url(self, i: int) -> str:
        """Server ``i``'s own address, bypassing HAProxy."""
        return f"http://127.0.0.1:{self.ports[i]}"

    @property
    def config_path(self) -> Path:
        """The ``10xgraph.json`` the servers are started with."""
        return self.folder / "10xgraph.json"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        paths = [str(p) for p in self.pythonpath] + [str(ROOT)]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        return env

    # -- servers ---------------------------------------------------------------------------------
    def command(self, i: int) -> list[str]:
        """The command line of server ``i``."""
        return [
            sys.executable,
            "-m",
            "tenxgraph.cli",
            "serve",
            "--config",
            str(self.config_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.ports[i]),
            *self.serve_args,
        ]

    def start_server(self, i: int, wait: bool = True, timeout_s: float = 60) -> None:
        """Start (or restart) server ``i`` on its port; with ``wait``, until ``/ping`` answers."""
        log = open(self.folder / f"server{i}.log", "ab")  # noqa: SIM115 - owned by the child
        proc = subprocess.Popen(
            self.command(i),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self._env(),
            cwd=self.folder,
            start_new_session=True,
        )
        log.close()
        self.procs[i] = proc
        if wait:
            wait_http_ok(self.server_url(i) + "/ping", timeout_s, proc)

    def signal_server(self, i: int, sig: int) -> subprocess.Popen[bytes] | None:
        """Send ``sig`` to server ``i``'s process group (uvicorn's workers too)."""
        proc = self.procs[i]
        if proc is None or proc.poll() is not None:
            return None
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return None
        return proc

    def kill(self, i: int) -> None:
        """SIGKILL server ``i`` (and its workers) and reap it."""
        proc = self.signal_server(i, signal.SIGKILL)
        if proc is not None:
            proc.wait(10)
            self.kills += 1
        self.procs[i] = None

    def alive(self, i: int) -> bool:
        """Whether server ``i``'s process is running."""
        proc = self.procs[i]
        return proc is not None and proc.poll() is None

    # -- the whole -------------------------------------------------------------------------------
    def start(self, timeout_s: float = 90) -> Cluster:
        """Write the config files, start the servers and HAProxy; wait until all answer.

        Raises:
            RuntimeError: HAProxy missing (run ``scripts/services.sh``) or a process not
                answering within ``timeout_s``.
        """
        binary = haproxy_path()
        if binary is None:
            raise RuntimeError("haproxy is not installed; run scripts/services.sh")
        cfg: dict[str, object] = {"agent": self.agent}
        if self.auth is not None:
            cfg["auth"] = self.auth
        self.config_path.write_text(json.dumps(cfg), encoding="utf-8")
        self.ports = [free_port() for _ in range(self.n)]
        self.front_port = free_port()
        self.procs = [None] * self.n
        try:
            for i in range(self.n):
                self.start_server(i, wait=False)
            for i in range(self.n):
                proc = self.procs[i]
                wait_http_ok(self.server_url(i) + "/ping", timeout_s, proc)
            hcfg = self.folder / "haproxy.cfg"
            hcfg.write_text(haproxy_config(self.front_port, self.ports), encoding="utf-8")
            hlog = open(self.folder / "haproxy.log", "ab")  # noqa: SIM115 - owned by the child
            self.haproxy = subprocess.Popen(
                [binary, "-f", str(hcfg), "-db"],
                stdout=hlog,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            hlog.close()
            wait_http_ok(self.url + "/ping", 20, self.haproxy)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop HAProxy and every server (SIGTERM, then SIGKILL after 15 s); idempotent."""
        if self.haproxy is not None and self.haproxy.poll() is None:
            self.haproxy.terminate()
            try:
                self.haproxy.wait(10)
            except subprocess.TimeoutExpired:
                self.haproxy.kill()
                self.haproxy.wait(5)
        self.haproxy = None
        live = []
        for i in range(len(self.procs)):
            proc = self.signal_server(i, signal.SIGTERM)
            if proc is not None:
                live.append((i, proc))
        for i, proc in live:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                self.signal_server(i, signal.SIGKILL)
                proc.wait(5)
        self.procs = [None] * len(self.procs)

    def logs(self, tail_chars: int = 4000) -> str:
        """The end of every server's log and HAProxy's, for a failure message."""
        out = []
        for p in sorted(self.folder.glob("*.log")):
            text = p.read_text(encoding="utf-8", errors="replace")
            out.append(f"--- {p.name} ---\n{text[-tail_chars:]}")
        return "\n".join(out)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
