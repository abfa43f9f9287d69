"""``LocalFileMediaStore``: media as files under one directory, sharded by key.

Layout: ``{base_dir}/{key[0:2]}/{key[2:4]}/{key}{ext}`` for the bytes and
``{key}.meta.json`` beside it (``mime_type``, ``size_bytes``, ``ext`` and the caller's
metadata). Files are written to a temporary name and renamed, the metadata last, so a reader
never sees half an object.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import anyio

from tenxgraph.core.exceptions import MediaNotFoundError

from .base import BaseMediaStore, _mime_to_ext, check_key

__all__ = ["LocalFileMediaStore", "_mime_to_ext"]


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _reserved(mime_type: str, size: int, ext: str) -> dict[str, Any]:
    return {"mime_type": mime_type, "size_bytes": size, "ext": ext}


class LocalFileMediaStore(BaseMediaStore):
    """Media as files under ``base_dir`` (created when missing).

    Args:
        base_dir: the root directory (default ``./tenxgraph_media``).

    Keys are checked before any path is built: a key such as ``../../etc/passwd`` raises
    ``ValidationError`` ("Invalid storage key", a ``ValueError``).
    """

    def __init__(self, base_dir: str | os.PathLike[str] = "./tenxgraph_media") -> None:
        self.base_dir = Path(base_dir)

    def _dir(self, key: str) -> Path:
        check_key(key)
        return self.base_dir / key[:2] / key[2:4]

    def _meta_path(self, key: str) -> Path:
        return self._dir(key) / f"{key}.meta.json"

    def _read_meta(self, key: str) -> dict[str, Any] | None:
        try:
            meta = json.loads(self._meta_path(key).read_bytes())
        except FileNotFoundError:
            return None
        return meta if isinstance(meta, dict) else None

    async def store(
        self, data: bytes, mime_type: str, metadata: dict[str, Any] | None = None
    ) -> str:
        """See :meth:`BaseMediaStore.store`."""
        key = uuid.uuid4().hex
        ext = _mime_to_ext(mime_type)
        meta = {**(metadata or {}), **_reserved(mime_type, len(data), ext)}

        def write() -> None:
            _write_atomic(self._dir(key) / f"{key}{ext}", bytes(data))
            _write_atomic(self._meta_path(key), json.dumps(meta).encode())

        await anyio.to_thread.run_sync(write)
        return key

    async def retrieve(self, key: str) -> tuple[bytes, str]:
        """See :meth:`BaseMediaStore.retrieve`."""

        def read() -> tuple[bytes, str] | None:
            meta = self._read_meta(key)
            if meta is None:
                return None
            try:
                data = (self._dir(key) / f"{key}{meta.get('ext', '')}").read_bytes()
            except FileNotFoundError:
                return None
            return data, str(meta.get("mime_type") or "application/octet-stream")

        found = await anyio.to_thread.run_sync(read)
        if found is None:
            raise MediaNotFoundError(f"Media not found: {key}", context={"key": key})
        return found

    async def delete(self, key: str) -> bool:
        """See :meth:`BaseMediaStore.delete`."""

        def remove() -> bool:
            meta = self._read_meta(key)
            if meta is None:
                return False
            self._meta_path(key).unlink(missing_ok=True)
            (self._dir(key) / f"{key}{meta.get('ext', '')}").unlink(missing_ok=True)
            return True

        return await anyio.to_thread.run_sync(remove)

    async def exists(self, key: str) -> bool:
        """See :meth:`BaseMediaStore.exists`."""
        return await self.get_metadata(key) is not None

    async def get_metadata(self, key: str) -> dict[str, Any] | None:
        """See :meth:`BaseMediaStore.get_metadata`."""
        return await anyio.to_thread.run_sync(self._read_meta, key)
