"""A TCP relay to Postgres, on 127.0.0.1, that cuts a connection around a checkpoint write.

Written for the exactly-once tests: it forwards bytes both ways and reads the PostgreSQL wire
protocol just enough to find the moment to cut.

* ``arm("after_commit")``: the next client statement whose text holds ``marker`` (the
  checkpoint write's CTE name) is forwarded; when the server's ``ReadyForQuery`` that ends it
  comes back (the implicit transaction has committed by then), the relay drops the connection
  instead of forwarding that answer. The client sees a dead connection, the row is committed.
* ``arm("before_send")``: the connection is dropped when the client sends that statement, which
  never reaches the server.
* ``blackout_s``: after a cut, every connection (open or new) is dropped for that many seconds,
  so the client cannot read the outcome back either.
* ``arm("stall_after_commit")``: as ``after_commit``, but the connection is black-holed instead
  of dropped: it stays open and nothing more is forwarded in either direction (a route that
  silently loses packets). With ``blackout_s``, every open connection is black-holed too, and
  new ones are accepted but never answered for that long (the whole route is lost).

The client must connect with ``sslmode=disable gssencmode=disable`` (the relay reads the
protocol) and ``prepare_threshold=None`` (every execution carries the statement text).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from typing import Any

from psycopg.conninfo import make_conninfo


class PgRelay:
    """Asyncio TCP relay to ``target`` (host, port); start with ``await relay.start()``."""

    def __init__(
        self, target: tuple[str, int] = ("127.0.0.1", 5432), marker: bytes = b"new_checkpoint"
    ) -> None:
        self.target = target
        self.marker = marker
        self.mode: str | None = None
        self.blackout_s = 0.0
        self.blackout_until = 0.0
        self.cuts = 0
        self.stalling = False
        self.stalling_armed = False
        self._closing = asyncio.Event()
        self._held: set[Any] = set()
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[_Conn] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> PgRelay:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def dsn(self, base_dsn: str) -> str:
        """``base_dsn`` through the relay."""
        return make_conninfo(
            base_dsn, host="127.0.0.1", port=str(self.port), sslmode="disable", gssencmode="disable"
        )

    def arm(self, mode: str, *, blackout_s: float = 0.0) -> None:
        """Cut the next checkpoint write (``"after_commit"`` or ``"before_send"``)."""
        assert mode in ("after_commit", "before_send", "stall_after_commit")
        self.mode = mode
        self.blackout_s = blackout_s

    def _stall_done(self) -> None:
        self.mode = None
        self.cuts += 1
        self.stalling = True
        if self.blackout_s:
            self.blackout_until = time.monotonic() + self.blackout_s
            for c in self._conns:
                c.stalled = True

    def _cut_done(self) -> None:
        self.mode = None
        self.cuts += 1
        self.stalling = False
        if self.blackout_s:
            self.blackout_until = time.monotonic() + self.blackout_s
            for c in list(self._conns):
                c.close()

    def in_blackout(self) -> bool:
        return time.monotonic() < self.blackout_until

    async def close(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.close()
        for c in list(self._conns):
            c.close()
        for w in list(self._held):
            with contextlib.suppress(Exception):
                w.transport.abort()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if self.in_blackout():
            if self.stalling:  # accepted, never answered
                self._held.add(cwriter)
                await self._closing.wait()
                return
            cwriter.close()
            return
        try:
            sreader, swriter = await asyncio.open_connection(*self.target)
        except OSError:
            cwriter.close()
            return
        conn = _Conn(self, creader, cwriter, sreader, swriter)
        self._conns.add(conn)
        try:
            await conn.run()
        finally:
            self._conns.discard(conn)
            conn.close()


class _Conn:
    def __init__(
        self, relay: PgRelay, creader: Any, cwriter: Any, sreader: Any, swriter: Any
    ) -> None:
        self.relay = relay
        self.creader, self.cwriter = creader, cwriter
        self.sreader, self.swriter = sreader, swriter
        self.cut_at_ready = False
        self.stalled = False
        self.sbuf = b""

    def close(self) -> None:
        for w in (self.cwriter, self.swriter):
            with contextlib.suppress(Exception):
                w.transport.abort()

    async def run(self) -> None:
        up = asyncio.ensure_future(self._client_to_server())
        down = asyncio.ensure_future(self._server_to_client())
        try:
            await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (up, down):
                t.cancel()
            await asyncio.gather(up, down, return_exceptions=True)

    async def _client_to_server(self) -> None:
        while True:
            data = await self.creader.read(1 << 16)
            if self.stalled:
                if not data:
                    return
                continue  # black hole: dropped
            if not data or (self.relay.in_blackout() and not self.relay.stalling):
                return
            relay = self.relay
            if relay.mode is not None and relay.marker in data:
                if relay.mode == "before_send":
                    relay._cut_done()
                    return
                self.cut_at_ready = True
                relay.stalling_armed = relay.mode == "stall_after_commit"
                relay.mode = None
            self.swriter.write(data)
            await self.swriter.drain()

    async def _server_to_client(self) -> None:
        while True:
            data = await self.sreader.read(1 << 16)
            if not data or (self.relay.in_blackout() and not self.relay.stalling):
                return
            if self.stalled:
                continue  # black hole: dropped
            if self.cut_at_ready and self._ends_with_ready(data):
                self.cut_at_ready = False
                if self.relay.stalling_armed:
                    self.stalled = True
                    self.relay._stall_done()
                    continue
                self.relay._cut_done()
                return
            self.cwriter.write(data)
            await self.cwriter.drain()

    def _ends_with_ready(self, data: bytes) -> bool:
        """Frame the server's messages (type byte, int32 length); ``True`` when a
        ``ReadyForQuery`` ('Z') is among them."""
        self.sbuf += data
        seen = False
        while len(self.sbuf) >= 5:
            kind = self.sbuf[:1]
            (length,) = struct.unpack("!i", self.sbuf[1:5])
            if len(self.sbuf) < 1 + length:
                break
            self.sbuf = self.sbuf[1 + length :]
            if kind == b"Z":
                seen = True
        return seen
