"""Helpers for media that providers keep themselves (OpenAI Files, Gemini File API).

``ProviderMediaCache`` remembers, per provider, what a provider returned for given content
(an uploaded file's id or URI), keyed by the content's SHA-256, so the same bytes are not
uploaded twice by one process.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

__all__ = [
    "GOOGLE_INLINE_THRESHOLD",
    "ProviderMediaCache",
    "create_openai_file_attachment",
    "create_openai_file_search_tool",
    "should_use_google_file_api",
]

#: Largest payload in bytes sent inline to Gemini (its request limit is 20 MB); larger media
#: should go through the Gemini File API.
GOOGLE_INLINE_THRESHOLD = 20 * 1024 * 1024


def should_use_google_file_api(size_bytes: int) -> bool:
    """Whether media of ``size_bytes`` bytes is over :data:`GOOGLE_INLINE_THRESHOLD`."""
    return size_bytes > GOOGLE_INLINE_THRESHOLD


class ProviderMediaCache:
    """An LRU map ``(provider, content key) -> provider reference``.

    Args:
        max_entries: entries kept over all providers (default 1000); the least recently
            used is evicted first.
    """

    def __init__(self, max_entries: int = 1000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str], Any] = OrderedDict()

    @staticmethod
    def content_key(data: bytes) -> str:
        """The SHA-256 of ``data`` as 64 hex characters."""
        return hashlib.sha256(data).hexdigest()

    def get(self, provider: str, key: str) -> Any | None:
        """The reference stored for ``(provider, key)``, or ``None``."""
        entry = (provider, key)
        if entry not in self._entries:
            return None
        self._entries.move_to_end(entry)
        return self._entries[entry]

    def put(self, provider: str, key: str, value: Any) -> None:
        """Remember ``value`` for ``(provider, key)``, evicting the oldest entry when full."""
        self._entries[(provider, key)] = value
        self._entries.move_to_end((provider, key))
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def clear(self, provider: str | None = None) -> None:
        """Forget one provider's entries, or all of them when ``provider`` is ``None``."""
        if provider is None:
            self._entries.clear()
            return
        for entry in [e for e in self._entries if e[0] == provider]:
            del self._entries[entry]


def create_openai_file_search_tool(file_ids: list[str]) -> dict[str, Any]:
    """A ``file_search`` tool entry for an OpenAI request's ``tools`` list, over the given
    uploaded file ids: ``{"type": "file_search", "file_search": {"file_ids": [...]}}``."""
    return {"type": "file_search", "file_search": {"file_ids": list(file_ids)}}


def create_openai_file_attachment(file_id: str, tools: list[str] | None = None) -> dict[str, Any]:
    """An OpenAI message attachment: ``{"file_id": ..., "tools": [{"type": t}, ...]}``;
    ``tools`` defaults to ``["file_search"]``."""
    return {"file_id": file_id, "tools": [{"type": t} for t in (tools or ["file_search"])]}
