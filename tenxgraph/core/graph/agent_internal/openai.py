"""``_to_responses_content``: chat-completions content parts in the shape of OpenAI's
Responses API input (10xGraph's ``agent_internal.openai``).

tenxgraph talks to OpenAI-compatible servers through chat completions and does not send
Responses-API requests (``Agent(api_style="responses")`` is refused); this converter serves
code written against 10xGraph that builds such requests itself.
"""

from __future__ import annotations

from typing import Any

__all__ = ["_to_responses_content"]


def _part(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "text":
        return {"type": "input_text", "text": part.get("text", "")}
    if kind == "image_url":
        spec = part.get("image_url")
        url = spec.get("url") if isinstance(spec, dict) else spec
        return {"type": "input_image", "image_url": url}
    if kind == "input_audio":
        spec = part.get("input_audio") or {}
        return {
            "type": "input_audio",
            "data": spec.get("data"),
            "format": spec.get("format") or "wav",
        }
    if kind == "document":
        doc = part.get("document") or {}
        if doc.get("text"):
            return {"type": "input_text", "text": doc["text"]}
        if doc.get("url"):
            return {"type": "input_file", "file_url": doc["url"]}
        if doc.get("data"):
            mime = doc.get("mime_type") or "application/pdf"
            return {
                "type": "input_file",
                "filename": doc.get("filename") or "document",
                "file_data": f"data:{mime};base64,{doc['data']}",
            }
        return part
    if kind == "video":
        video = part.get("video") or {}
        where = video.get("url") or "inline video"
        return {"type": "input_text", "text": f"[Video: {where}]"}
    return part


def _to_responses_content(content: Any) -> Any:
    """Responses-API input parts for a chat-completions message content.

    ``text`` -> ``input_text``; ``image_url`` -> ``input_image`` (URL or ``data:`` URL);
    ``input_audio`` -> ``input_audio`` with ``data`` and ``format`` (``wav`` by default);
    a ``document`` -> ``input_text`` (its text), ``input_file`` (``file_url``, or
    ``file_data`` for inline data); a ``video``, which the Responses API cannot take, -> an
    ``input_text`` naming it. Other parts pass through unchanged, and so do a string and
    ``None``.
    """
    if not isinstance(content, list):
        return content
    return [_part(p) for p in content]
