"""``AgentGoogleMixin``: 10xGraph's conversion of prompt dicts to Gemini ``Content`` objects
(``google.genai.types``; extra ``google``).

tenxgraph's Gemini adapter (:mod:`tenxgraph.models.google`) builds its requests itself; this
mixin serves code written against 10xGraph's agent internals. Media parts are converted by
:func:`tenxgraph.models._gemini_parts.content_parts_to_gemini` (inline data, fetched
``http(s)`` URLs, other URIs as file data).
"""

from __future__ import annotations

from typing import Any

from tenxgraph.models._gemini_parts import content_parts_to_gemini
from tenxgraph.models.google import _sdk

__all__ = ["AgentGoogleMixin"]


class AgentGoogleMixin:
    """Prompt dicts (``{"role", "content"}``, content a string or a part list) to Gemini."""

    @staticmethod
    def _types() -> Any:
        return _sdk()[1]

    def _content_parts_to_google(self, parts: list[Any]) -> list[Any]:
        """``google.genai.types.Part`` objects for chat-completions content parts."""
        types = self._types()
        return [types.Part.model_validate(p) for p in content_parts_to_gemini(parts)]

    def _handle_regular_message(self, content: Any, role: str) -> Any:
        """A ``types.Content`` for one user or model turn: a string (or ``None``) becomes one
        text part; a part list is converted part by part; an empty result gets one empty text
        part, since Gemini refuses a turn without parts."""
        types = self._types()
        if isinstance(content, list):
            parts = self._content_parts_to_google(content)
        else:
            parts = [types.Part(text=str(content or ""))]
        if not parts:
            parts = [types.Part(text="")]
        return types.Content(role=role, parts=parts)

    def _convert_to_google_format(
        self, messages: list[dict[str, Any]]
    ) -> tuple[str | None, list[Any]]:
        """``(system_instruction, contents)``: system messages' text joined by blank lines
        (``None`` when there are none) and one ``Content`` per other message, ``assistant``
        as ``model``. Tool calls and tool results are not converted here (the Gemini adapter
        does that); a tool message's text is sent as a user turn."""
        system: list[str] = []
        contents: list[Any] = []
        for msg in messages:
            role = msg.get("role")
            content = msg.get("content")
            if role == "system":
                if isinstance(content, list):
                    content = "".join(
                        str(p.get("text", "")) for p in content if isinstance(p, dict)
                    )
                system.append(str(content or ""))
                continue
            g_role = "model" if role == "assistant" else "user"
            contents.append(self._handle_regular_message(content, g_role))
        return ("\n\n".join(system) or None), contents
