"""Chat-completions user content parts as Anthropic Messages-API content blocks.

``text`` -> text; ``image_url`` -> an ``image`` block (``base64`` source for a ``data:``
URL, ``url`` source otherwise); ``file`` / neutral ``document`` parts holding a PDF or plain
text -> a ``document`` block (``base64``, ``text`` or ``url`` source). Audio and video, which
the Messages API does not take, become a text block naming them, so the model knows something
was attached.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

__all__ = ["content_parts_to_anthropic"]


def _data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 payload)`` of a ``data:...;base64,...`` URL, else ``None``."""
    if url.startswith("data:") and ";base64," in url:
        head, payload = url[5:].split(";base64,", 1)
        return head or "application/octet-stream", payload
    return None


def _document(data: str | None, url: str | None, mime: str) -> dict[str, Any] | None:
    if data:
        if mime == "text/plain":
            try:
                text = base64.b64decode(data, validate=True).decode()
            except (binascii.Error, ValueError):
                return None
            source: dict[str, Any] = {"type": "text", "media_type": "text/plain", "data": text}
        else:
            source = {"type": "base64", "media_type": mime, "data": data}
        return {"type": "document", "source": source}
    if url:
        return {"type": "document", "source": {"type": "url", "url": url}}
    return None


def _part(part: Any) -> dict[str, Any] | None:
    if not isinstance(part, dict):
        return {"type": "text", "text": str(part)}
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": str(part.get("text") or "")}
    if kind == "image_url":
        spec = part.get("image_url")
        url = str((spec.get("url") if isinstance(spec, dict) else spec) or "")
        inline = _data_url(url)
        if inline is not None:
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": inline[0], "data": inline[1]},
            }
        return {"type": "image", "source": {"type": "url", "url": url}} if url else None
    if kind == "file":
        spec = part.get("file") or {}
        inline = _data_url(str(spec.get("file_data") or ""))
        if inline is not None:
            return _document(inline[1], None, inline[0])
        return None
    if kind == "document":
        spec = part.get("document") or {}
        if spec.get("text"):
            return {"type": "text", "text": str(spec["text"])}
        mime = str(spec.get("mime_type") or "application/pdf")
        return _document(spec.get("data"), spec.get("url"), mime)
    if kind in ("input_audio", "video"):
        return {
            "type": "text",
            "text": f"[{'audio' if kind == 'input_audio' else 'video'} "
            "attachment not supported by this model]",
        }
    return None


def content_parts_to_anthropic(parts: list[Any]) -> list[dict[str, Any]]:
    """Anthropic content blocks for chat-completions user content parts, in order
    (module docstring); parts with nothing usable are left out."""
    out = []
    for part in parts:
        block = _part(part)
        if block is not None:
            out.append(block)
    return out
