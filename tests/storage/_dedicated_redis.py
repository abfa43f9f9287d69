"""A ``redis-server`` of a test's own (stopped, restarted or paused by the test), shared by the
Redis tier tests so they never disturb the shared server on 6379."""

from __future__ import annotations

import socket
import subprocess
import time

import redis


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DedicatedRedis:
    """A ``redis-server`` of this test's own, which the test may stop, restart or pause."""

    def __init__(self, tmp: str) -> None:
        self.port = _free_port()
        self.tmp = tmp
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        subprocess.run(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "yes",
                "--dir",
                self.tmp,
                "--pidfile",
                f"{self.tmp}/redis-{self.port}.pid",
                "--logfile",
                f"{self.tmp}/redis-{self.port}.log",
            ],
            check=True,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                with redis.Redis(port=self.port, socket_timeout=0.5) as c:
                    if c.ping():
                        return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def stop(self) -> None:
        subprocess.run(
            ["redis-cli", "-p", str(self.port), "shutdown", "nosave"],
            capture_output=True,
            check=False,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    time.sleep(0.02)
            except OSError:
                return

    def pause(self, ms: int) -> None:
        with redis.Redis(port=self.port) as c:
            c.execute_command("CLIENT", "PAUSE", ms, "ALL")

    def client(self) -> redis.Redis:
        """A client of this server (the caller closes it)."""
        return redis.Redis(port=self.port)
