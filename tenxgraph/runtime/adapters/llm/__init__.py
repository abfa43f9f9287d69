"""LLM response converters, as 10xGraph names them.

``BaseConverter`` (``.base_converter``) turns one provider response into a ``Message``;
``OpenAIConverter`` (``.openai_converter``) does it for OpenAI chat-completions responses,
``OpenAIResponsesConverter`` (``.openai_responses_converter``) for Responses-API answers and
``GoogleGenAIConverter`` (``.google_genai_converter``) for Gemini answers (import those two
from their modules); ``ModelResponseConverter`` (``.model_response_converter``) pairs a response (or a callable
producing it) with a converter.
"""

from __future__ import annotations

from .base_converter import BaseConverter, ConverterType
from .model_response_converter import ModelResponseConverter
from .openai_converter import OpenAIConverter

__all__ = ["BaseConverter", "ConverterType", "ModelResponseConverter", "OpenAIConverter"]
