"""``OpenAIResponsesConverter``: OpenAI Responses-API answers to tenxgraph messages.

tenxgraph does not send Responses-API requests itself (``Agent(api_style="responses")`` is
refused); this converter serves applications that call the Responses API themselves and want
the answer as a :class:`~tenxgraph.core.state.Message`. Output items: ``reasoning`` (its
summary texts become a ``ReasoningBlock``), ``message`` (``output_text`` parts become text,
``output_image`` and ``output_audio`` parts image and audio blocks), ``image_generation_call``
(the generated image, base64) and ``function_call`` (a tool call). Objects of the ``openai``
SDK, objects with the same attributes, and dicts are all read.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state import Message
from tenxgraph.core.state.message import TokenUsages
from tenxgraph.core.state.message_block import (
    AudioBlock,
    ImageBlock,
    MediaRef,
    ReasoningBlock,
    TextBlock,
)
from tenxgraph.models.base import assistant_message
from tenxgraph.runtime.publisher.events import EventModel

from ._fields import field, items
from .base_converter import BaseConverter

__all__ = ["OpenAIResponsesConverter"]


def _usage(usage: Any) -> TokenUsages | None:
    if usage is None:
        return None
    prompt = int(field(usage, "input_tokens", 0) or 0)
    completion = int(field(usage, "output_tokens", 0) or 0)
    details = field(usage, "output_tokens_details")
    return TokenUsages(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=int(field(usage, "total_tokens", 0) or prompt + completion),
        reasoning_tokens=int(field(details, "reasoning_tokens", 0) or 0) if details else 0,
    )


class _Answer:
    """What the output items of one answer add up to."""

    def __init__(self) -> None:
        self.reasoning: list[str] = []
        self.text: list[str] = []
        self.media: list[Any] = []
        self.calls: list[dict[str, Any]] = []
        self.usage: Any = None

    def message(self, metadata: dict[str, Any]) -> Message:
        msg = assistant_message(
            "".join(self.text) or None,
            self.calls,
            usages=_usage(self.usage),
            metadata={k: v for k, v in metadata.items() if v is not None},
        )
        lead: list[Any] = [ReasoningBlock(thinking="\n".join(self.reasoning))]
        msg.content = (lead if self.reasoning else []) + list(msg.content) + self.media
        return msg


class OpenAIResponsesConverter(BaseConverter):
    """Converts Responses-API answers (module docstring)."""

    def _extract_media_from_message_item(self, item: Any) -> list[ImageBlock | AudioBlock]:
        """Image and audio blocks of a ``message`` output item, in order (text parts are
        read elsewhere); ``[]`` when its content is empty or ``None``."""
        blocks: list[ImageBlock | AudioBlock] = []
        for part in field(item, "content") or ():
            kind = field(part, "type")
            if kind == "output_image":
                data = field(part, "image_data")
                url = field(part, "image_url")
                if data:
                    ref = MediaRef(kind="data", data_base64=str(data), mime_type="image/png")
                    blocks.append(ImageBlock(media=ref))
                elif url:
                    blocks.append(ImageBlock(media=MediaRef(kind="url", url=str(url))))
            elif kind == "output_audio" and field(part, "data"):
                ref = MediaRef(kind="data", data_base64=str(field(part, "data")))
                ref.mime_type = f"audio/{field(part, 'format') or 'wav'}"
                blocks.append(AudioBlock(media=ref, transcript=field(part, "transcript")))
        return blocks

    def _extract_image_generation(self, item: Any) -> ImageBlock | None:
        """The image of an ``image_generation_call`` item (its ``result``: base64 text, or
        an object or dict with ``b64_json`` or ``data``), or ``None`` when it has none."""
        result = field(item, "result")
        if isinstance(result, str):
            data: Any = result
        elif result is not None:
            data = field(result, "b64_json") or field(result, "data")
        else:
            data = None
        if not data:
            return None
        return ImageBlock(media=MediaRef(kind="data", data_base64=str(data), mime_type="image/png"))

    def _read_item(self, item: Any, answer: _Answer) -> list[Any]:
        """Add one output item to ``answer``; returns the media blocks it brought."""
        kind = field(item, "type")
        media: list[Any] = []
        if kind == "reasoning":
            texts = [str(field(s, "text") or "") for s in field(item, "summary") or ()]
            answer.reasoning.append("".join(texts))
        elif kind == "message":
            for part in field(item, "content") or ():
                if field(part, "type") == "output_text":
                    answer.text.append(str(field(part, "text") or ""))
            media = list(self._extract_media_from_message_item(item))
        elif kind == "image_generation_call":
            block = self._extract_image_generation(item)
            media = [block] if block is not None else []
        elif kind == "function_call":
            answer.calls.append(
                {
                    "id": field(item, "call_id") or field(item, "id") or "",
                    "name": field(item, "name") or "",
                    "arguments": field(item, "arguments") or "{}",
                }
            )
        answer.media.extend(media)
        return media

    async def convert_response(self, response: Any) -> Message:
        """Convert one Responses-API answer (``response.output`` items; usage from
        ``response.usage``: ``input_tokens``, ``output_tokens``).

        Raises:
            ValidationError: ``VALIDATION_000`` when the object has no ``output`` list.
        """
        output = field(response, "output")
        if not isinstance(output, (list, tuple)):
            raise ValidationError(
                "OpenAIResponsesConverter takes a Responses-API answer with an output list",
                context={"field": "response", "reason": "no output"},
            )
        answer = _Answer()
        for item in output:
            self._read_item(item, answer)
        answer.usage = field(response, "usage")
        return answer.message(
            {
                "model": field(response, "model"),
                "response_id": field(response, "id"),
                "status": field(response, "status"),
            }
        )

    async def convert_streaming_response(
        self,
        config: dict[str, Any],
        node_name: str,
        response: Any,
        meta: dict[str, Any] | None = None,
    ) -> AsyncGenerator[Message | EventModel]:
        """Convert a stream of Responses-API events: a delta message per
        ``response.output_text.delta`` and ``response.reasoning_summary_text.delta``, a delta
        per media block of each ``response.output_item.done``, then the complete message
        (usage from ``response.completed``).

        Args:
            config: the run config (not read).
            node_name: the node producing the response (not read).
            response: an iterable or async iterable of events.
            meta: merged into the final message's ``metadata``.

        Raises:
            ValidationError: ``VALIDATION_000`` when ``response`` is not iterable.
        """
        del config, node_name
        answer = _Answer()
        delta_id = Message(role="assistant").message_id

        def on_event(event: Any) -> list[Message]:
            kind = field(event, "type")
            if kind == "response.output_text.delta":
                piece = str(field(event, "delta") or "")
                answer.text.append(piece)
                text_block: list[Any] = [TextBlock(text=piece)]
                return [
                    Message(message_id=delta_id, role="assistant", content=text_block, delta=True)
                ]
            if kind == "response.reasoning_summary_text.delta":
                piece = str(field(event, "delta") or "")
                answer.reasoning.append(piece)
                block = ReasoningBlock(thinking=piece)
                return [Message(message_id=delta_id, role="assistant", content=[block], delta=True)]
            if kind == "response.output_item.done":
                item = field(event, "item")
                if field(item, "type") == "message":  # its text came as deltas already
                    media = list(self._extract_media_from_message_item(item))
                    answer.media.extend(media)
                else:
                    media = self._read_item(item, answer)
                return [
                    Message(message_id=delta_id, role="assistant", content=[b], delta=True)
                    for b in media
                ]
            if kind == "response.completed":
                answer.usage = field(field(event, "response"), "usage")
            return []

        async for event in items(response, "OpenAIResponsesConverter"):
            for msg in on_event(event):
                yield msg
        final = answer.message({})
        if meta:
            final.metadata.update(meta)
        yield final
