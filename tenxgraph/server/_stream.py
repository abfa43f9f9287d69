"""The newline-delimited JSON stream of ``POST /v1/graph/stream`` and its resume protocol.

Every line is one ``StreamChunk`` as JSON whose ``metadata`` carries, as 10xGraph's server adds
them, ``thread_id`` and ``is_new_thread`` (the request named no thread), and tenxgraph's
``event_id``, ``"<seq>:<message id>"``:
``seq`` counts the lines of this response (a resumed response continues from the cursor's), the
message id is the last complete message sent so far (the line's own for a ``message`` chunk).

A client whose stream broke re-sends the same request (same message ids) with the header
``Last-Event-ID: <event id of the last line it read>``. The server then

1. reads the thread's durable state and sends, in order, the messages of that turn that come
   after the cursor's message (the turn: the request's input messages, then what followed them
   up to the next ``user`` message);
2. runs the request again through the runtime, which answers an already finished turn without
   running anything, waits for a lapsed lease and finishes a cut-off run, or waits behind a run
   still under way (``enqueue``); message chunks already sent (by id) are skipped;
3. before the final line, reads the state once more and sends any message of the turn still
   unsent (a message committed by a holder that died after step 1).

Message chunks of non-generator nodes are yielded by the runtime only after the checkpoint
holding them committed, so a message a client has seen is durable and a durable message is
sent at most once per resumed response. Token deltas (``message.delta``) are not replayed.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator
from typing import Any

import anyio
import orjson
from anyio.abc import TaskGroup

from tenxgraph.core.exceptions import ERROR_CODES
from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.state import Message
from tenxgraph.core.state.stream_chunks import StreamChunk, StreamEvent
from tenxgraph.utils.constants import ResponseGranularity

from ._envelope import INTERNAL_MESSAGE, ApiError, public_text

__all__ = ["parse_cursor", "stream_ndjson"]

logger = logging.getLogger("tenxgraph.server")


def _public_error(data: dict[str, Any]) -> dict[str, Any]:
    """An error line's ``data`` as invoke's 500 would say it: a tenxgraph error keeps its code
    and message; a foreign exception's text (which may carry internals) is replaced by the
    generic message and the code ``INTERNAL_ERROR``."""
    if data.get("error_code") in ERROR_CODES:
        return {
            **data,
            "reason": public_text(str(data.get("reason") or "")),
            "message": public_text(str(data.get("message") or "")),
        }
    return {
        **data,
        "error_code": "INTERNAL_ERROR",
        "reason": INTERNAL_MESSAGE,
        "message": INTERNAL_MESSAGE,
    }


#: the longest part of a client's ``Last-Event-ID`` echoed in an error (characters)
ECHO_MAX = 100


def parse_cursor(value: str | None) -> tuple[int, str] | None:
    """``(seq, message_id)`` of a ``Last-Event-ID`` header, ``None`` when absent.

    Raises:
        ApiError: 422 ``VALIDATION_000`` when it is not ``"<seq>:<message id>"``.
    """
    if value is None or not value.strip():
        return None
    seq, sep, mid = value.strip().partition(":")
    if not sep or not seq.isdigit() or not mid:
        raise ApiError(422, "VALIDATION_000", "Last-Event-ID must be '<seq>:<message id>' as sent")
    return int(seq), mid


def _turn(context: list[Message], inputs: list[Message]) -> list[Message]:
    """The input messages as stored followed by their answer (up to the next user message)."""
    ids = [m.message_id for m in context]
    first = inputs[0].message_id
    if first not in ids:
        return []
    i = ids.index(first)
    out = list(context[i : i + len(inputs)])
    for m in context[i + len(inputs) :]:
        if m.role == "user":
            break
        out.append(m)
    return out


class _Lines:
    """Numbers lines, tracks the last message id sent, and adds 10xGraph's per-request
    ``metadata`` (``thread_id``, ``is_new_thread``) to every line."""

    def __init__(self, seq: int, last_mid: str, is_new_thread: bool) -> None:
        self.seq = seq
        self.last_mid = last_mid
        self.is_new_thread = is_new_thread
        self.sent: set[str] = set()

    def line(self, chunk: StreamChunk) -> bytes:
        msg = chunk.message
        if chunk.event == StreamEvent.MESSAGE and msg is not None and not msg.delta:
            self.last_mid = str(msg.message_id)
            self.sent.add(self.last_mid)
        self.seq += 1
        body = chunk.model_dump(mode="json")
        if chunk.event == StreamEvent.ERROR:
            body["data"] = _public_error(body.get("data") or {})
        body["metadata"] = {
            **(body.get("metadata") or {}),
            "thread_id": chunk.thread_id,
            "is_new_thread": self.is_new_thread,
            "event_id": f"{self.seq}:{self.last_mid}",
        }
        return orjson.dumps(body) + b"\n"

    def skip(self, chunk: StreamChunk) -> bool:
        msg = chunk.message
        return (
            chunk.event == StreamEvent.MESSAGE
            and msg is not None
            and str(msg.message_id) in self.sent
        )


async def stream_ndjson(
    graph: CompiledGraph[Any],
    input_data: dict[str, Any],
    config: dict[str, Any],
    granularity: ResponseGranularity,
    cursor: tuple[int, str] | None,
    inputs: list[Message],
    runs: TaskGroup | None = None,
) -> AsyncIterator[bytes]:
    """The NDJSON lines of one stream request (see the module docstring for the protocol).

    Args:
        graph: the served graph.
        input_data: the run input (``{"messages": [...], ...}``).
        config: the run config (``thread_id``, ``user_id`` set).
        granularity: the response granularity.
        cursor: ``(seq, message id)`` from ``Last-Event-ID``, or ``None`` for a first request.
        inputs: the request's input messages (the turn's key).
        runs: the app's task group (opened by its lifespan): the run goes on in it when the
            client's connection drops, so the turn is finished and stored; ``None`` (an app
            mounted without its lifespan) ties the run to the response.

    Raises:
        ApiError: 422 when the cursor names no message of this turn (checked before any line).
    """
    is_new = not config.get("thread_id")
    lines = _Lines(0, str(inputs[0].message_id), is_new)
    durable: list[Message] = []
    if cursor is not None:
        seq, mid = cursor
        state = await graph.aget_state(config)
        turn = _turn(list(state.context) if state is not None else [], inputs)
        ids = [str(m.message_id) for m in turn] or [str(m.message_id) for m in inputs]
        if mid not in ids:
            raise ApiError(
                422,
                "VALIDATION_000",
                f"Last-Event-ID names message {mid[:ECHO_MAX]!r}, not one of this turn",
            )
        cut = ids.index(mid) + 1
        lines = _Lines(seq, mid, is_new)
        lines.sent.update(ids[:cut])
        durable = turn[cut:]
    return _generate(graph, input_data, config, granularity, cursor, inputs, lines, durable, runs)


async def _chunks(
    graph: CompiledGraph[Any],
    input_data: dict[str, Any],
    config: dict[str, Any],
    granularity: ResponseGranularity,
    runs: TaskGroup | None,
) -> AsyncIterator[StreamChunk]:
    """The run's chunks; with ``runs``, the run is a task of the app that a dropped client does
    not cancel (chunks nobody reads any more are dropped, the run goes on to its end)."""
    if runs is None:
        with contextlib.suppress(Exception):  # astream yielded an error chunk before raising
            async for chunk in graph.astream(input_data, config, granularity):
                yield chunk
        return
    send, receive = anyio.create_memory_object_stream[StreamChunk](max_buffer_size=math.inf)

    async def produce() -> None:
        reader = True
        with send:
            try:
                async for chunk in graph.astream(input_data, config, granularity):
                    if reader:
                        try:
                            send.send_nowait(chunk)
                        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                            reader = False  # the client left: finish the run unread
            except Exception as exc:  # noqa: BLE001 - stored in the thread; its chunk was sent
                logger.info("streamed run ended with %s", type(exc).__name__)

    runs.start_soon(produce)
    with receive:
        async for chunk in receive:
            yield chunk


async def _generate(
    graph: CompiledGraph[Any],
    input_data: dict[str, Any],
    config: dict[str, Any],
    granularity: ResponseGranularity,
    cursor: tuple[int, str] | None,
    inputs: list[Message],
    lines: _Lines,
    durable: list[Message],
    runs: TaskGroup | None,
) -> AsyncIterator[bytes]:
    for m in durable:
        yield lines.line(
            StreamChunk.fast(
                StreamEvent.MESSAGE,
                message=m,
                thread_id=config.get("thread_id"),
                metadata={"resumed": True},
            )
        )
    pending: StreamChunk | None = None
    async for chunk in _chunks(graph, input_data, config, granularity, runs):
        if lines.skip(chunk):
            continue
        if pending is not None:
            yield lines.line(pending)
        pending = chunk
    if pending is not None and pending.event == StreamEvent.ERROR:
        yield lines.line(pending)
        return
    if cursor is not None:
        state = await graph.aget_state(config)
        for m in _turn(list(state.context) if state is not None else [], inputs):
            if str(m.message_id) not in lines.sent:
                yield lines.line(
                    StreamChunk.fast(
                        StreamEvent.MESSAGE,
                        message=m,
                        thread_id=config.get("thread_id"),
                        metadata={"resumed": True},
                    )
                )
    if pending is not None:
        yield lines.line(pending)
