"""The chaos driver: turns over many threads through the load balancer while servers die.

A 10xGraph client's retry loop (docs/idempotent-turns.md): every turn has its own message id,
kept across the retries of that turn; a turn is retried (after a short pause) on a transport
error, a 5xx, a 409 or a broken stream, until it is acknowledged: an ``invoke`` answered 200
with the turn's answer, or a stream that delivered the answer and its final ``state`` chunk. A
stream that breaks is resumed from its last chunk (``Last-Event-ID``) on whatever server the
balancer picks; the chunks of one stream, across its resumes, must come in order with none
missing and none repeated.

Meanwhile a chaos loop SIGKILLs a random server every ``kill_every_s`` seconds and restarts
it. At the end every thread is read from Postgres (in this process) and compared with what was
acknowledged. Used by ``tests/server_lb/test_lb_chaos.py`` (bounded) and
``benchmarks/server_chaos.py`` (full size).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
from _lb_cluster import Cluster

#: Pause before a retry, seconds (a real client backs off; the lease TTL bounds the wait).
RETRY_PAUSE_S = 0.2


@dataclass
class Counts:
    """What a chaos run counted (see the module docstring)."""

    threads: int = 0
    turns_sent: int = 0
    turns_acknowledged: int = 0
    turns_stored: int = 0
    turns_lost: int = 0
    duplicates: int = 0
    out_of_order_threads: int = 0
    turns_given_up: int = 0
    retries: int = 0
    streams: int = 0
    streams_broken: int = 0
    streams_resumed: int = 0
    streams_lost_chunk: int = 0
    streams_repeated_chunk: int = 0
    kills: int = 0
    replayed_answers: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        """The counts as a plain dict (errors: the 10 most common)."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("errors", "problems")}
        out["errors"] = dict(self.errors.most_common(10))
        out["problems"] = self.problems[:20]
        return out


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b
        )
    return ""


def _body(thread_id: str, mid: str, text: str) -> dict[str, Any]:
    return {
        "messages": [{"message_id": mid, "role": "user", "content": text}],
        "config": {"thread_id": thread_id},
    }


class Driver:
    """Sends the turns and keeps the counts.

    Args:
        base_url: the load balancer.
        threads: number of threads (conversations), each sending its turns one after another.
        turns: turns per thread.
        headers: sent with every request (``Authorization``).
        deadline_s: a turn still unacknowledged this long after the run started is given up.
        prefix: thread ids are ``<prefix>-0000``, ``<prefix>-0001``, ...
        streamed: stream every other turn (``False``: every turn is an ``invoke``).
    """

    def __init__(
        self,
        base_url: str,
        threads: int,
        turns: int,
        headers: dict[str, str] | None = None,
        deadline_s: float = 600.0,
        prefix: str = "c",
        streamed: bool = True,
    ) -> None:
        self.base_url = base_url
        self.n_threads = threads
        self.turns = turns
        self.headers = headers or {}
        self.deadline_s = deadline_s
        self.prefix = prefix
        self.streamed = streamed
        self.counts = Counts(threads=threads)
        self.acked: dict[str, set[int]] = {}
        #: message id of a streamed, acknowledged turn -> ids of the messages its stream
        #: delivered (across resumes), in order
        self.streamed_turns: dict[str, list[str]] = {}
        #: what each lost or repeated line or message was (for a failure message)
        self.problems: list[str] = []
        self._t0 = 0.0

    def thread_id(self, i: int) -> str:
        """The id of thread ``i``."""
        return f"{self.prefix}-{i:04d}"

    @staticmethod
    def turn_text(thread_id: str, k: int) -> str:
        """The user text of turn ``k`` of a thread."""
        return f"{thread_id}#{k}"

    # -- one turn --------------------------------------------------------------------------------
    async def _invoke(self, client: httpx.AsyncClient, tid: str, mid: str, text: str) -> bool:
        r = await client.post("/v1/graph/invoke", json=_body(tid, mid, text))
        if r.status_code != 200:
            self.counts.errors[f"invoke {r.status_code}"] += 1
            return False
        data = r.json().get("data") or {}
        texts = [_text(m) for m in data.get("messages") or []]
        if r.headers.get("x-tenxgraph-already-processed") or data.get("already_processed"):
            self.counts.replayed_answers += 1
        return f"answer:{text}" in texts

    async def _stream(self, client: httpx.AsyncClient, tid: str, mid: str, text: str) -> bool:
        """One streamed turn, resumed from its last line after each break; ``True`` when the
        answer and the final ``state`` chunk arrived.

        Each line carries ``metadata.event_id`` = ``"<seq>:<message id>"``; the lines of one
        stream, across its resumes, must have consecutive ``seq`` (a gap: a line lost; a
        repeat: a line sent twice), and no message may arrive twice. The messages received
        are kept for :meth:`verify`, which compares them with the turn as stored.
        """
        self.counts.streams += 1
        last_seq = 0
        received: list[str] = []
        got_answer = False
        broke = False
        # The cursor before the first line (the server numbers lines from 1; the message id
        # of the cursor is the input's): a retry that received nothing still resumes, so the
        # server replays what a dead instance already committed of this turn.
        headers: dict[str, str] = {}
        resume_from_start = {"Last-Event-ID": f"0:{mid}"}
        body = _body(tid, mid, text)
        for _attempt in range(50):
            if broke:
                await asyncio.sleep(RETRY_PAUSE_S)
                headers = headers or resume_from_start
            try:
                async with client.stream(
                    "POST", "/v1/graph/stream", json=body, headers=headers
                ) as r:
                    if r.status_code != 200:
                        self.counts.errors[f"stream {r.status_code}"] += 1
                        await r.aread()
                        if not broke:
                            self.counts.streams_broken += 1
                        broke = True
                        continue
                    async for line in r.aiter_lines():
                        if not line.strip():
                            continue
                        chunk = orjson.loads(line)
                        cid = _chunk_id(chunk)
                        if cid is not None:
                            seq = int(cid.partition(":")[0])
                            if seq <= last_seq:
                                self.counts.streams_repeated_chunk += 1
                                self.problems.append(f"{mid}: line {seq} again")
                            elif seq != last_seq + 1:
                                self.counts.streams_lost_chunk += 1
                                self.problems.append(f"{mid}: line {seq} after {last_seq}")
                            last_seq = max(last_seq, seq)
                            headers = {"Last-Event-ID": cid}
                        if chunk.get("event") == "error":
                            data = chunk.get("data") or {}
                            self.counts.errors[f"stream error {data.get('error_code')}"] += 1
                        msg = chunk.get("message")
                        if isinstance(msg, dict) and not msg.get("delta"):
                            if str(msg.get("message_id")) in received:
                                self.counts.streams_repeated_chunk += 1
                                self.problems.append(
                                    f"{mid}: message {msg.get('message_id')} again"
                                )
                            received.append(str(msg.get("message_id")))
                            if _text(msg) == f"answer:{text}":
                                got_answer = True
                        if _is_final(chunk):
                            if broke:
                                self.counts.streams_resumed += 1
                            if got_answer:
                                self.streamed_turns[mid] = received
                            return got_answer
            except (httpx.TransportError, orjson.JSONDecodeError) as exc:
                self.counts.errors[f"stream {type(exc).__name__}"] += 1
            if not broke:
                self.counts.streams_broken += 1
            broke = True
        return False

    async def _turn(self, client: httpx.AsyncClient, tid: str, k: int, streamed: bool) -> None:
        mid = f"{tid}-m{k}"
        text = self.turn_text(tid, k)
        self.counts.turns_sent += 1
        first = True
        while time.monotonic() - self._t0 < self.deadline_s:
            if not first:
                self.counts.retries += 1
                await asyncio.sleep(RETRY_PAUSE_S)
            first = False
            try:
                ok = await (self._stream if streamed else self._invoke)(client, tid, mid, text)
            except httpx.TransportError as exc:
                self.counts.errors[f"invoke {type(exc).__name__}"] += 1
                continue
            if ok:
                self.counts.turns_acknowledged += 1
                self.acked.setdefault(tid, set()).add(k)
                return
        self.counts.turns_given_up += 1

    async def _thread(self, client: httpx.AsyncClient, i: int) -> None:
        tid = self.thread_id(i)
        for k in range(self.turns):
            # Half of the turns are streamed: alternate, starting with invoke on even threads.
            await self._turn(client, tid, k, streamed=self.streamed and (i + k) % 2 == 1)

    async def run(self, concurrency: int | None = None) -> None:
        """Send every turn (threads in parallel, at most ``concurrency`` at once)."""
        self._t0 = time.monotonic()
        limits = httpx.Limits(max_connections=concurrency or self.n_threads)
        timeout = httpx.Timeout(120.0, connect=5.0)
        sem = asyncio.Semaphore(concurrency or self.n_threads)
        async with httpx.AsyncClient(
            base_url=self.base_url, headers=self.headers, limits=limits, timeout=timeout
        ) as client:

            async def one(i: int) -> None:
                async with sem:
                    await self._thread(client, i)

            await asyncio.gather(*(one(i) for i in range(self.n_threads)))
        self.counts.elapsed_s = time.monotonic() - self._t0

    # -- the check -------------------------------------------------------------------------------
    def _check_streams(self, context: list[Any]) -> None:
        """Count streamed turns whose stream missed a message of the turn as stored."""
        for m in context:
            got = self.streamed_turns.get(str(m.message_id))
            # The answer's messages (the input is the client's own; a stream resumed before
            # its first line does not echo it).
            missing = set(_turn_ids(context, str(m.message_id))[1:]) - set(got or ())
            if got is not None and missing:
                self.counts.streams_lost_chunk += 1
                self.problems.append(f"{m.message_id}: stream missed {sorted(missing)} of {got}")

    async def verify(self, graph: Any) -> None:
        """Read every thread from the store and count stored, lost and duplicated turns."""
        c = self.counts
        for i in range(self.n_threads):
            tid = self.thread_id(i)
            state = await graph.aget_state({"thread_id": tid})
            context = list(state.context) if state is not None else []
            texts = [m.text() for m in context]
            self._check_streams(context)
            counts = Counter(texts)
            c.duplicates += sum(n - 1 for n in counts.values() if n > 1)
            users = [t for t in texts if t.startswith(f"{tid}#")]
            ks = [int(t.rsplit("#", 1)[1]) for t in users]
            if ks != sorted(ks):
                c.out_of_order_threads += 1
            for k in range(self.turns):
                text = self.turn_text(tid, k)
                stored = all(
                    counts.get(t, 0) >= 1 for t in (text, f"think:{text}", f"answer:{text}")
                )
                if stored:
                    c.turns_stored += 1
                if k in self.acked.get(tid, set()) and not stored:
                    c.turns_lost += 1


def _turn_ids(context: list[Any], mid: str) -> list[str]:
    """Ids of the turn started by user message ``mid``: it, then what follows up to the next
    user message (what a stream of that turn must deliver)."""
    ids = [str(m.message_id) for m in context]
    if mid not in ids:
        return []
    i = ids.index(mid)
    out = [mid]
    for m in context[i + 1 :]:
        if m.role == "user":
            break
        out.append(str(m.message_id))
    return out


def _chunk_id(chunk: dict[str, Any]) -> str | None:
    """The resume cursor of a line (``metadata.event_id``, ``"<seq>:<message id>"``)."""
    meta = chunk.get("metadata")
    cid = meta.get("event_id") if isinstance(meta, dict) else None
    return None if cid is None else str(cid)


def _is_final(chunk: dict[str, Any]) -> bool:
    """The last chunk of a stream: the final ``state`` chunk (``data.status`` set)."""
    data = chunk.get("data")
    return (
        chunk.get("event") == "state"
        and isinstance(data, dict)
        and "status" in data
        and data.get("status") != "already_processed"
    )


async def chaos_loop(
    cluster: Cluster, kill_every_s: float, stop: asyncio.Event, seed: int = 7
) -> None:
    """SIGKILL a random server every ``kill_every_s`` seconds and restart it, until ``stop``.

    The restart happens right away (the killed server comes back on its port once its graph is
    loaded; HAProxy's health check adds it back): at most one server is down at a time.
    """
    rnd = random.Random(seed)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), kill_every_s)
            return
        except TimeoutError:
            pass
        i = rnd.randrange(cluster.n)
        await asyncio.to_thread(cluster.kill, i)
        await asyncio.to_thread(cluster.start_server, i, True, 60)
