"""``StreamEmitter``: live progress from a running tool to ``stream()`` / ``astream()``.

A tool declares a parameter named ``emit`` (``emit: StreamEmitter | None = None``); the
``ToolNode`` fills it when the run's chunks are consumed (``astream`` / ``stream``) and passes
``None`` otherwise (``invoke`` / ``ainvoke``, ``ToolNode.invoke``, and a call answered from the
tool ledger, which does not run the tool). The parameter is never shown to the model.

Each call of :meth:`StreamEmitter.progress`, :meth:`~StreamEmitter.error`,
:meth:`~StreamEmitter.message` or :meth:`~StreamEmitter.update` puts one ``StreamChunk`` in the
stream while the tool is still running (on asyncio; under trio the chunks follow when the tool
node's calls have finished). Every such chunk is an ``updates`` chunk whose ``data`` holds
``status`` (``"tool_progress"``, ``"tool_failed"``, ``"tool_message"``, or the ``status`` given
to ``update``), ``tool_name``, ``tool_call_id``, ``node``, ``thread_id``, ``run_id``, the
``message`` when one was given, and the caller's ``data`` keys. ``tool_failed`` is
informational: it is not an ``error`` chunk, which in tenxgraph means the run failed.
Progress chunks are never stored: the thread keeps only the tool's result.

Methods are plain (not ``async``) and safe to call from sync tools, which run in worker
threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .stream_chunks import StreamChunk, StreamEvent

__all__ = ["StreamEmitter"]


class StreamEmitter:
    """Sends a running tool's progress to the stream (module docstring).

    Created by the ``ToolNode`` for each call; a tool receives it in its ``emit`` parameter.

    Attributes:
        tool_name: the tool's name.
        tool_call_id: the model's id of this call.
        node_name: the ``ToolNode``'s node.
        thread_id: the run's thread.
        run_id: the run.
    """

    __slots__ = ("_send", "_step", "node_name", "run_id", "thread_id", "tool_call_id", "tool_name")

    def __init__(
        self,
        tool_name: str,
        tool_call_id: str,
        node_name: str,
        thread_id: str | None,
        run_id: str | None,
        send: Callable[[StreamChunk], None],
        step: int = 0,
    ) -> None:
        """Args:
        tool_name: the tool's name.
        tool_call_id: the call's id.
        node_name: the ToolNode's node.
        thread_id: the run's thread.
        run_id: the run.
        send: puts a chunk in the run's stream (thread-safe).
        step: the node's step (chunk metadata).
        """
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.node_name = node_name
        self.thread_id = thread_id
        self.run_id = run_id
        self._send = send
        self._step = step

    def _emit(self, status: str | None, message: str | None, data: dict[str, Any] | None) -> None:
        if data is not None and not isinstance(data, dict):
            raise TypeError(f"emit data must be a dict, got {type(data).__name__}")
        payload: dict[str, Any] = {}
        if status is not None:
            payload["status"] = status
        payload.update(
            tool_name=self.tool_name,
            tool_call_id=self.tool_call_id,
            node=self.node_name,
            thread_id=self.thread_id,
            run_id=self.run_id,
        )
        if message is not None:
            payload["message"] = str(message)
        for k, v in (data or {}).items():
            payload.setdefault(k, v)
        self._send(
            StreamChunk.fast(
                StreamEvent.UPDATES,
                data=payload,
                thread_id=self.thread_id,
                run_id=self.run_id,
                metadata={"node": self.node_name, "step": self._step},
            )
        )

    def progress(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Report a step of the work (status ``"tool_progress"``).

        Args:
            message: what is happening, for a person.
            data: extra keys for the chunk's ``data``.

        Raises:
            TypeError: ``data`` is not a dict.
        """
        self._emit("tool_progress", message, data)

    def error(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Report a problem the tool works around (status ``"tool_failed"``); the tool goes
        on and its result is returned as usual.

        Args:
            message: what went wrong.
            data: extra keys for the chunk's ``data``.

        Raises:
            TypeError: ``data`` is not a dict.
        """
        self._emit("tool_failed", message, data)

    def message(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Report anything else (status ``"tool_message"``).

        Args:
            message: the text.
            data: extra keys for the chunk's ``data``.

        Raises:
            TypeError: ``data`` is not a dict.
        """
        self._emit("tool_message", message, data)

    def update(self, data: dict[str, Any]) -> None:
        """Send structured data; its ``status`` key (when present) is the chunk's status.

        Args:
            data: the keys for the chunk's ``data``.

        Raises:
            TypeError: ``data`` is not a dict.
        """
        if not isinstance(data, dict):
            raise TypeError(f"emit.update takes a dict, got {type(data).__name__}")
        rest = dict(data)
        status = rest.pop("status", None)
        self._emit(None if status is None else str(status), None, rest)
