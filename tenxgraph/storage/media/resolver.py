"""``MediaRefResolver``: a ``MediaRef`` as what a provider accepts.

External URLs, provider file ids and inline data pass through in the provider's shape.
Internal references (``graph://media/{key}``) are read from the media store: as a signed
direct URL when the store hands one out (cloud stores), else as the bytes, inlined as a
``data:`` URL. Signed URLs can be shared between processes through a cache backend (any
object with ``aget_cache_value(namespace, key)`` and ``aput_cache_value(namespace, key,
value, ttl_seconds=)``, such as a tenxgraph checkpointer).
"""

from __future__ import annotations

import base64
import time
from typing import Any

from tenxgraph.core.exceptions import MediaError
from tenxgraph.core.state.message_block import MediaRef

from .storage.base import BaseMediaStore, internal_key

__all__ = ["MediaRefResolver"]

_CACHE_NAMESPACE = "media-direct-url"


class MediaRefResolver:
    """Resolves media references for provider requests (module docstring).

    Args:
        media_store: the store internal references are read from; without one, an internal
            reference raises ``MediaError`` ``MEDIA_001``.
        cache_backend: optional cache of signed URLs (see the module docstring).
        direct_url_expiration_seconds: lifetime asked for a signed URL when a cache backend
            is set (default 3600); without one the store's default applies.
        direct_url_refresh_buffer_seconds: a cached URL is replaced this many seconds before
            it expires (default 60).
    """

    def __init__(
        self,
        media_store: BaseMediaStore | None = None,
        cache_backend: Any | None = None,
        direct_url_expiration_seconds: int = 3600,
        direct_url_refresh_buffer_seconds: int = 60,
    ) -> None:
        self.media_store = media_store
        self.cache_backend = cache_backend
        self.direct_url_expiration_seconds = direct_url_expiration_seconds
        self.direct_url_refresh_buffer_seconds = direct_url_refresh_buffer_seconds

    def with_cache(
        self,
        cache_backend: Any,
        expiration_seconds: int = 3600,
        refresh_buffer_seconds: int = 60,
    ) -> MediaRefResolver:
        """A resolver over the same store that caches signed URLs in ``cache_backend``."""
        return MediaRefResolver(
            self.media_store, cache_backend, expiration_seconds, refresh_buffer_seconds
        )

    def _store(self, key: str) -> BaseMediaStore:
        if self.media_store is None:
            raise MediaError(
                f"media reference graph://media/{key} cannot be read: no MediaStore "
                "configured (pass media_store= to compile() or to MediaRefResolver)",
                error_code="MEDIA_001",
                context={"key": key},
            )
        return self.media_store

    async def direct_url(self, key: str, mime_type: str | None) -> str | None:
        """The store's signed URL for ``key`` (through the cache when one is set), or
        ``None`` when the store has none."""
        store = self._store(key)
        if self.cache_backend is None:
            return await store.get_direct_url(key, mime_type=mime_type)
        cache_key = f"{key}:{mime_type or ''}"
        now = time.time()
        cached = await self.cache_backend.aget_cache_value(_CACHE_NAMESPACE, cache_key)
        if (
            isinstance(cached, dict)
            and isinstance(cached.get("url"), str)
            and float(cached.get("expires_at", 0)) - self.direct_url_refresh_buffer_seconds > now
        ):
            return str(cached["url"])
        lifetime = self.direct_url_expiration_seconds
        url = await store.get_direct_url(key, mime_type=mime_type, expiration=lifetime)
        if url is not None:
            ttl = max(1, lifetime - self.direct_url_refresh_buffer_seconds)
            await self.cache_backend.aput_cache_value(
                _CACHE_NAMESPACE,
                cache_key,
                {"url": url, "expires_at": now + lifetime},
                ttl_seconds=ttl,
            )
        return url

    async def read(self, ref: MediaRef) -> tuple[bytes, str]:
        """The bytes and MIME type of an inline or internal reference.

        Raises:
            MediaError: ``MEDIA_001`` for an internal reference without a store; ``MEDIA_000``
                for an external URL or a file id (the bytes are not ours to read).
            MediaNotFoundError: ``MEDIA_NOT_FOUND_000`` when the store lacks the key.
        """
        if ref.kind == "data" and ref.data_base64 is not None:
            return base64.b64decode(ref.data_base64), ref.mime_type or "application/octet-stream"
        key = internal_key(ref.url) if ref.kind == "url" else None
        if key is None:
            raise MediaError(
                f"a {ref.kind!r} media reference has no bytes to read here",
                context={"kind": ref.kind},
            )
        data, mime = await self._store(key).retrieve(key)
        return data, ref.mime_type or mime

    async def resolve_to_data(self, ref: MediaRef) -> MediaRef:
        """``ref`` with an internal reference replaced by its bytes (``kind="data"``,
        ``mime_type`` and ``size_bytes`` filled); any other reference returned as it is."""
        key = internal_key(ref.url) if ref.kind == "url" else None
        if key is None:
            return ref
        data, mime = await self._store(key).retrieve(key)
        return ref.model_copy(
            update={
                "kind": "data",
                "url": None,
                "data_base64": base64.b64encode(data).decode(),
                "mime_type": ref.mime_type or mime,
                "size_bytes": len(data),
            }
        )

    async def resolve_for_openai(self, ref: MediaRef) -> dict[str, Any]:
        """An OpenAI chat-completions ``image_url`` part for ``ref``:
        ``{"type": "image_url", "image_url": {"url": ...}}`` with the external URL, the
        file id, a ``data:{mime};base64,...`` URL (``application/octet-stream`` when the
        MIME type is unknown), or for an internal reference the store's signed URL or its
        bytes as a ``data:`` URL."""
        if ref.kind == "file_id":
            return {"type": "image_url", "image_url": {"url": ref.file_id or ""}}
        if ref.kind == "data":
            mime = ref.mime_type or "application/octet-stream"
            url = f"data:{mime};base64,{ref.data_base64 or ''}"
            return {"type": "image_url", "image_url": {"url": url}}
        key = internal_key(ref.url)
        if key is None:
            return {"type": "image_url", "image_url": {"url": ref.url or ""}}
        direct = await self.direct_url(key, ref.mime_type)
        if direct is not None:
            return {"type": "image_url", "image_url": {"url": direct}}
        data, mime = await self._store(key).retrieve(key)
        encoded = base64.b64encode(data).decode()
        return {
            "type": "image_url",
            "image_url": {"url": f"data:{ref.mime_type or mime};base64,{encoded}"},
        }
