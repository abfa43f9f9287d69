"""``InMemoryMediaStore``: media kept in this process (tests, development)."""

from __future__ import annotations

import uuid
from typing import Any

from tenxgraph.core.exceptions import MediaNotFoundError

from .base import BaseMediaStore

__all__ = ["InMemoryMediaStore"]


class InMemoryMediaStore(BaseMediaStore):
    """Media in a dict of this process; lost when it exits. ``len(store)`` counts the
    objects and ``clear()`` drops them all."""

    def __init__(self) -> None:
        self._objects: dict[str, tuple[bytes, str, dict[str, Any]]] = {}

    async def store(
        self, data: bytes, mime_type: str, metadata: dict[str, Any] | None = None
    ) -> str:
        """Keep ``data``; see :meth:`BaseMediaStore.store`."""
        key = uuid.uuid4().hex
        meta = {**(metadata or {}), "mime_type": mime_type, "size_bytes": len(data)}
        self._objects[key] = (bytes(data), mime_type, meta)
        return key

    async def retrieve(self, key: str) -> tuple[bytes, str]:
        """See :meth:`BaseMediaStore.retrieve`."""
        try:
            data, mime, _ = self._objects[key]
        except KeyError:
            raise MediaNotFoundError(f"Media not found: {key}", context={"key": key}) from None
        return data, mime

    async def delete(self, key: str) -> bool:
        """See :meth:`BaseMediaStore.delete`."""
        return self._objects.pop(key, None) is not None

    async def exists(self, key: str) -> bool:
        """See :meth:`BaseMediaStore.exists`."""
        return key in self._objects

    async def get_metadata(self, key: str) -> dict[str, Any] | None:
        """See :meth:`BaseMediaStore.get_metadata`."""
        entry = self._objects.get(key)
        return dict(entry[2]) if entry else None

    def __len__(self) -> int:
        return len(self._objects)

    def clear(self) -> None:
        """Drop every object."""
        self._objects.clear()
