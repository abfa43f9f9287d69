"""Internal media references in an Agent's prompt, read back before the model call.

Messages in a thread keep ``graph://media/{key}`` references (``compile(media_store=...)``);
no provider can fetch those, so the prompt an ``Agent`` sends carries the bytes instead
(copies of the messages: the state keeps its references).
"""

from __future__ import annotations

from tenxgraph.core._context import current_run
from tenxgraph.core.state import Message

__all__ = ["inline_media_refs"]


def _has_internal_ref(messages: list[Message]) -> bool:
    from tenxgraph.storage.media.storage.base import internal_key

    for msg in messages:
        for block in msg.content:
            media = getattr(block, "media", None)
            if media is not None and media.kind == "url" and internal_key(media.url):
                return True
    return False


async def inline_media_refs(messages: list[Message]) -> list[Message]:
    """``messages`` with internal media references replaced by their bytes (inline base64),
    read from the running graph's media store; the list itself when there are none.

    Raises:
        MediaError: ``MEDIA_001`` when a message holds a reference but the graph was compiled
            without ``media_store=``.
        MediaNotFoundError: ``MEDIA_NOT_FOUND_000`` when the store lacks a referenced key.
    """
    if not _has_internal_ref(messages):
        return messages
    from tenxgraph.storage.media.resolver import MediaRefResolver
    from tenxgraph.utils.converter import resolve_media_refs

    run = current_run()
    store = getattr(run.graph, "media_store", None) if run is not None else None
    return await resolve_media_refs(messages, MediaRefResolver(media_store=store))
