"""Chat-completions content parts as Gemini parts (plain dicts, no SDK needed).

Input: the part lists of OpenAI-style prompt dicts (``text``, ``image_url``, ``input_audio``,
``file`` with ``file_data``, and the neutral ``document`` / ``video`` parts of
:mod:`tenxgraph.utils.converter`).
Output: ``{"text": ...}``, ``{"inline_data": {"mime_type", "data": bytes}}`` or
``{"file_data": {"file_uri", "mime_type"}}``, which ``google.genai.types.Part`` validates.

Inline data (``data:`` URLs, base64 payloads) becomes ``inline_data``. An ``http(s)`` URL is
fetched and inlined when ``fetch`` is true (Gemini reads only its own file URIs and
``gs://`` objects); a URL that cannot be fetched, or any other URI, is passed as
``file_data`` for Gemini to read itself.
"""

from __future__ import annotations

import base64
import binascii
import logging
import urllib.request
from typing import Any

__all__ = ["FETCH_LIMIT_BYTES", "content_parts_to_gemini"]

logger = logging.getLogger(__name__)

#: Largest response in bytes read when inlining a fetched URL (Gemini's inline limit).
FETCH_LIMIT_BYTES = 20 * 1024 * 1024
_FETCH_TIMEOUT_S = 10.0


def _b64(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _inline(data: bytes, mime: str) -> dict[str, Any]:
    return {"inline_data": {"mime_type": mime, "data": data}}


def _fetch(url: str) -> tuple[bytes, str | None] | None:
    """GET an ``http(s)`` URL (at most :data:`FETCH_LIMIT_BYTES`), or ``None`` on failure."""
    if not url.startswith(("https://", "http://")):
        return None
    try:
        with urllib.request.urlopen(url, timeout=_FETCH_TIMEOUT_S) as response:  # noqa: S310
            data = response.read(FETCH_LIMIT_BYTES + 1)
            mime = response.headers.get("Content-Type")
    except (OSError, ValueError) as exc:
        logger.info("media URL not fetched (%s); passed to Gemini as a file URI", exc)
        return None
    if not isinstance(data, bytes) or len(data) > FETCH_LIMIT_BYTES:
        return None
    return data, mime.split(";", 1)[0].strip() if isinstance(mime, str) else None


def _url_part(url: str, mime: str | None, default_mime: str, fetch: bool) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        head, payload = url[5:].split(";base64,", 1)
        data = _b64(payload)
        if data is not None:
            return _inline(data, head or mime or default_mime)
    if fetch:
        got = _fetch(url)
        if got is not None:
            return _inline(got[0], mime or got[1] or default_mime)
    return {"file_data": {"file_uri": url, "mime_type": mime or default_mime}}


def _part(part: Any, fetch: bool) -> dict[str, Any] | None:
    if not isinstance(part, dict):
        return {"text": str(part)}
    kind = part.get("type")
    if kind == "text":
        return {"text": str(part.get("text") or "")}
    if kind == "image_url":
        spec = part.get("image_url")
        url = spec.get("url") if isinstance(spec, dict) else spec
        return _url_part(str(url or ""), None, "image/jpeg", fetch) if url else None
    if kind == "input_audio":
        spec = part.get("input_audio") or {}
        data = _b64(str(spec.get("data") or ""))
        fmt = str(spec.get("format") or "wav")
        return _inline(data, f"audio/{fmt}") if data is not None else None
    if kind == "file":
        spec = part.get("file") or {}
        data_url = str(spec.get("file_data") or "")
        return _url_part(data_url, None, "application/pdf", False) if data_url else None
    if kind in ("document", "video"):
        spec = part.get(kind) or {}
        default = "application/pdf" if kind == "document" else "video/mp4"
        mime = spec.get("mime_type") or default
        if kind == "document" and spec.get("text"):
            return {"text": str(spec["text"])}
        if spec.get("data"):
            data = _b64(str(spec["data"]))
            return _inline(data, mime) if data is not None else None
        if spec.get("url"):
            return _url_part(str(spec["url"]), mime, default, fetch)
        return None
    return {"text": str(part.get("text") or "")} if "text" in part else None


def content_parts_to_gemini(parts: list[Any], *, fetch: bool = True) -> list[dict[str, Any]]:
    """Gemini part dicts for chat-completions content parts, in order (module docstring).

    Args:
        parts: the content parts.
        fetch: whether ``http(s)`` URLs are fetched and inlined (default ``True``).

    Returns:
        The parts; a part with nothing usable (undecodable base64, an unknown type without
        text) is left out.
    """
    out = []
    for part in parts:
        converted = _part(part, fetch)
        if converted is not None:
            out.append(converted)
    return out
