"""``ModelResponseConverter``: a model response (or a callable producing it) and the converter
that turns it into tenxgraph messages."""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import AsyncGenerator
from typing import Any

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state import Message
from tenxgraph.runtime.publisher.events import EventModel

from .base_converter import BaseConverter

__all__ = ["ModelResponseConverter"]

logger = logging.getLogger(__name__)

# Converter name -> (module under tenxgraph.runtime.adapters.llm, class). Looked up when used,
# so a converter module is imported only by the code that names it.
_BY_NAME = {
    "openai": ("openai_converter", "OpenAIConverter"),
    "openai_responses": ("openai_responses_converter", "OpenAIResponsesConverter"),
    "google": ("google_genai_converter", "GoogleGenAIConverter"),
}


def _named_converter(name: str) -> BaseConverter:
    if name not in _BY_NAME:
        raise ValidationError(
            f"Unsupported converter: {name}",
            context={"field": "converter", "reason": f"known: {sorted(_BY_NAME)}"},
        )
    module, cls = _BY_NAME[name]
    mod = importlib.import_module(f"{__package__}.{module}")
    converter: BaseConverter = getattr(mod, cls)()
    return converter


class ModelResponseConverter:
    """Pairs a response with its converter.

    Args:
        response (Any): the provider's response, or a sync or async callable returning it
            (called when converting).
        converter (str | BaseConverter): a converter, or its name (``"openai"``,
            ``"openai_responses"``, ``"google"``).

    Raises:
        ValidationError: ``VALIDATION_000`` (a ``ValueError``, message ``Unsupported converter:
            <name>``) for an unknown name.
    """

    def __init__(self, response: Any, converter: str | BaseConverter) -> None:
        self.response = response
        self.converter: BaseConverter = (
            _named_converter(converter) if isinstance(converter, str) else converter
        )

    async def _resolve(self) -> Any:
        value = self.response() if callable(self.response) else self.response
        if inspect.isawaitable(value):
            value = await value
        return value

    async def invoke(self) -> Message:
        """Produce the response (calling it if callable) and convert it.

        Returns:
            Message: the converter's message.
        """
        response = await self._resolve()
        if response is None:
            logger.warning("Received empty response while converting a model response")
        return await self.converter.convert_response(response)

    async def stream(
        self, config: dict[str, Any], node_name: str, meta: dict[str, Any] | None = None
    ) -> AsyncGenerator[Message | EventModel]:
        """Produce the response and stream its conversion.

        Args:
            config (dict): the run config; must not be empty.
            node_name (str): the node producing the response.
            meta (dict | None): passed to the converter.

        Yields:
            Message | EventModel: what the converter yields.

        Raises:
            ValidationError: ``VALIDATION_000`` (a ``ValueError``) when ``config`` is empty.
        """
        if not config:
            raise ValidationError(
                "Config must be provided for streaming conversion",
                context={"field": "config", "reason": "empty"},
            )
        response = await self._resolve()
        if response is None:
            logger.warning("Received empty response while starting streaming conversion")
        async for item in self.converter.convert_streaming_response(
            config, node_name=node_name, response=response, meta=meta
        ):
            yield item
