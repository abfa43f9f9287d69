"""``GoogleGenAIConverter``: Gemini ``generateContent`` answers (``google-genai`` SDK objects,
objects with the same attributes, or dicts) to tenxgraph messages.

Parts: text (a ``thought`` part becomes a ``ReasoningBlock``), ``function_call`` (a tool
call), ``inline_data`` (an image, audio, video or document block by MIME type, the bytes
base64-encoded) and ``file_data`` (the same blocks, referencing the file URI).
tenxgraph's own Gemini adapter is :mod:`tenxgraph.models.google`; this converter serves code
that calls the SDK itself.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from tenxgraph.core.state import Message
from tenxgraph.core.state.message import TokenUsages
from tenxgraph.core.state.message_block import ReasoningBlock, TextBlock
from tenxgraph.models.base import assistant_message
from tenxgraph.runtime.publisher.events import EventModel

from ._fields import field, items, media_block
from .base_converter import BaseConverter

__all__ = ["GoogleGenAIConverter"]


def _usage(meta: Any) -> TokenUsages | None:
    if meta is None:
        return None
    prompt = int(field(meta, "prompt_token_count", 0) or 0)
    completion = int(field(meta, "candidates_token_count", 0) or 0)
    return TokenUsages(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=int(field(meta, "total_token_count", 0) or prompt + completion),
        reasoning_tokens=int(field(meta, "thoughts_token_count", 0) or 0),
        cache_read_input_tokens=int(field(meta, "cached_content_token_count", 0) or 0),
    )


def _parts(response: Any) -> list[Any]:
    candidates = field(response, "candidates") or []
    if not candidates:
        return []
    return list(field(field(candidates[0], "content"), "parts") or [])


class GoogleGenAIConverter(BaseConverter):
    """Converts Gemini answers (module docstring)."""

    def _process_inline_media_part(self, part: Any, blocks: list[Any]) -> None:
        """Append the media block of a part's ``inline_data``, if it has one."""
        inline = field(part, "inline_data")
        if inline is not None:
            block = media_block(field(inline, "data"), None, field(inline, "mime_type"))
            if block is not None:
                blocks.append(block)

    def _process_file_media_part(self, part: Any, blocks: list[Any]) -> None:
        """Append the media block of a part's ``file_data`` (its ``file_uri``), if any."""
        ref = field(part, "file_data")
        if ref is not None:
            block = media_block(None, field(ref, "file_uri"), field(ref, "mime_type"))
            if block is not None:
                blocks.append(block)

    def _read(
        self, parts: list[Any], text: list[str], thoughts: list[str], calls: list[Any]
    ) -> list[Any]:
        media: list[Any] = []
        for part in parts:
            piece = field(part, "text")
            if piece:
                (thoughts if field(part, "thought") else text).append(str(piece))
            call = field(part, "function_call")
            if call is not None:
                calls.append(
                    {
                        "id": field(call, "id") or "",
                        "name": field(call, "name") or "",
                        "args": dict(field(call, "args") or {}),
                    }
                )
            self._process_inline_media_part(part, media)
            self._process_file_media_part(part, media)
        return media

    @staticmethod
    def _message(
        text: list[str],
        thoughts: list[str],
        calls: list[Any],
        media: list[Any],
        usage: Any,
        metadata: dict[str, Any],
    ) -> Message:
        msg = assistant_message(
            "".join(text) or None,
            calls,
            usages=_usage(usage),
            metadata={k: v for k, v in metadata.items() if v is not None},
        )
        lead: list[Any] = [ReasoningBlock(thinking="".join(thoughts))] if thoughts else []
        msg.content = lead + list(msg.content) + media
        return msg

    async def convert_response(self, response: Any) -> Message:
        """Convert one answer (the first candidate's parts; usage from
        ``usage_metadata``)."""
        text: list[str] = []
        thoughts: list[str] = []
        calls: list[Any] = []
        media = self._read(_parts(response), text, thoughts, calls)
        candidates = field(response, "candidates") or [None]
        finish = field(candidates[0], "finish_reason")
        return self._message(
            text,
            thoughts,
            calls,
            media,
            field(response, "usage_metadata"),
            {
                "model": field(response, "model_version"),
                "response_id": field(response, "response_id"),
                "finish_reason": str(finish) if finish is not None else None,
            },
        )

    async def convert_streaming_response(
        self,
        config: dict[str, Any],
        node_name: str,
        response: Any,
        meta: dict[str, Any] | None = None,
    ) -> AsyncGenerator[Message | EventModel]:
        """Convert a stream of chunks: a delta message per text or thought piece and per
        media part, then the complete message.

        Args:
            config: the run config (not read).
            node_name: the node producing the response (not read).
            response: an iterable or async iterable of chunks.
            meta: merged into the final message's ``metadata``.

        Raises:
            ValidationError: ``VALIDATION_000`` when ``response`` is not iterable.
        """
        del config, node_name
        text: list[str] = []
        thoughts: list[str] = []
        calls: list[Any] = []
        media: list[Any] = []
        usage: list[Any] = [None]
        delta_id = Message(role="assistant").message_id

        def on_chunk(chunk: Any) -> list[Message]:
            n_text, n_thought = len(text), len(thoughts)
            new_media = self._read(_parts(chunk), text, thoughts, calls)
            media.extend(new_media)
            if field(chunk, "usage_metadata") is not None:
                usage[0] = field(chunk, "usage_metadata")
            blocks: list[Any] = [ReasoningBlock(thinking=t) for t in thoughts[n_thought:]]
            out = (
                [Message(message_id=delta_id, role="assistant", content=blocks, delta=True)]
                if blocks
                else []
            )
            out += [
                Message(
                    message_id=delta_id,
                    role="assistant",
                    content=[TextBlock(text=t)],
                    delta=True,
                )
                for t in text[n_text:]
            ]
            out += [
                Message(message_id=delta_id, role="assistant", content=[b], delta=True)
                for b in new_media
            ]
            return out

        async for chunk in items(response, "GoogleGenAIConverter"):
            for msg in on_chunk(chunk):
                yield msg
        final = self._message(text, thoughts, calls, media, usage[0], dict(meta or {}))
        yield final
