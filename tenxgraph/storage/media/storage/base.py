"""``BaseMediaStore``: where a thread's media bytes live, apart from its checkpoints.

A message holds a small ``MediaRef(kind="url", url="graph://media/{key}")``; the bytes stay in
the media store under ``key`` (32 hex characters), so a checkpoint never carries them and a
thread with images stays as small as one without.
"""

from __future__ import annotations

import mimetypes
import re
from abc import ABC, abstractmethod
from typing import Any

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state.message_block import MediaRef

__all__ = [
    "INTERNAL_PREFIXES",
    "INTERNAL_SCHEME",
    "BaseMediaStore",
    "internal_key",
    "internal_url",
]

#: Prefix of the URL naming media kept in a media store: ``graph://media/{key}``.
INTERNAL_SCHEME = "graph://media/"
#: Prefixes read as internal references: 10xGraph 0.10.3 writes ``graph://media/``; its
#: documentation writes ``agentflow://media/``. Both name a key of the media store.
INTERNAL_PREFIXES: tuple[str, ...] = (INTERNAL_SCHEME, "agentflow://media/")

_KEY = re.compile(r"[A-Za-z0-9_-]{4,128}")

#: Extensions for MIME types the standard library does not map (or maps differently).
_EXTENSIONS = {
    "image/jpeg": ".jpg",
    "image/webp": ".webp",
    "audio/mp3": ".mp3",
    "audio/mpeg": ".mp3",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/ogg": ".ogg",
    "audio/flac": ".flac",
    "video/mp4": ".mp4",
    "application/pdf": ".pdf",
    "text/plain": ".txt",
}


def _mime_to_ext(mime_type: str) -> str:
    """The file extension stores use for ``mime_type`` (``".png"``); ``".bin"`` when unknown."""
    mime = mime_type.lower().split(";", 1)[0].strip()
    return _EXTENSIONS.get(mime) or mimetypes.guess_extension(mime) or ".bin"


def internal_url(key: str) -> str:
    """The internal reference URL of ``key``: ``graph://media/{key}``."""
    return INTERNAL_SCHEME + key


def internal_key(url: str | None) -> str | None:
    """The store key an internal reference URL names, or ``None`` for any other URL."""
    if not url:
        return None
    for prefix in INTERNAL_PREFIXES:
        if url.startswith(prefix):
            return url[len(prefix) :]
    return None


def check_key(key: str) -> str:
    """``key`` if it can name a stored object (4-128 of ``A-Z a-z 0-9 _ -``).

    Raises:
        ValidationError: ``VALIDATION_000`` (a ``ValueError``): "Invalid storage key", for
            anything else (``../../etc/passwd``, ``a/b``), before any file or object is touched.
    """
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValidationError(
            "Invalid storage key: use the key a media store returned (4-128 letters, digits, "
            "'_' or '-')",
            context={"field": "key", "reason": "invalid characters or length"},
        )
    return key


class BaseMediaStore(ABC):
    """Interface of a media store (in memory, local files, cloud object storage).

    Keys are opaque strings returned by :meth:`store`. Every method is async; stores are safe
    to share between runs and threads of one event loop.
    """

    @abstractmethod
    async def store(
        self, data: bytes, mime_type: str, metadata: dict[str, Any] | None = None
    ) -> str:
        """Keep ``data`` and return its new key (32 lowercase hex characters).

        Args:
            data: the bytes.
            mime_type: their MIME type, e.g. ``"image/png"``.
            metadata: JSON-compatible extras kept beside the bytes.
        """

    @abstractmethod
    async def retrieve(self, key: str) -> tuple[bytes, str]:
        """The bytes and MIME type stored under ``key``.

        Raises:
            MediaNotFoundError: ``MEDIA_NOT_FOUND_000`` (a ``KeyError``) when nothing is.
        """

    @abstractmethod
    async def delete(self, key: str) -> bool:
        """Delete ``key``; ``True`` when something was deleted, ``False`` when absent."""

    @abstractmethod
    async def exists(self, key: str) -> bool:
        """Whether something is stored under ``key``."""

    async def get_metadata(self, key: str) -> dict[str, Any] | None:
        """The metadata kept with ``key`` (``mime_type``, ``size_bytes`` and the caller's
        extras), or ``None`` when absent. The default reads the object itself."""
        if not await self.exists(key):
            return None
        data, mime = await self.retrieve(key)
        return {"mime_type": mime, "size_bytes": len(data)}

    async def get_direct_url(
        self, key: str, mime_type: str | None = None, expiration: int = 3600
    ) -> str | None:
        """A URL a provider can fetch the object from directly (a signed URL), or ``None``
        when the store has none (memory and local stores): callers then send the bytes.

        Args:
            key: the object's key.
            mime_type: its MIME type, when known (saves a metadata lookup).
            expiration: lifetime of a signed URL in seconds.
        """
        del key, mime_type, expiration
        return None

    def to_media_ref(self, key: str, mime_type: str, **extras: Any) -> MediaRef:
        """The small reference a message keeps: ``MediaRef(kind="url",
        url="graph://media/{key}", mime_type=...)``.

        Args:
            key: the key :meth:`store` returned.
            mime_type: the media's MIME type.
            **extras: other ``MediaRef`` fields (``filename``, ``width``, ``height``,
                ``size_bytes``, ``sha256``...); an unknown field raises pydantic's
                ``ValidationError``.
        """
        return MediaRef(kind="url", url=internal_url(key), mime_type=mime_type, **extras)
