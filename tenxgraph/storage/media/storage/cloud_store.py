"""``CloudMediaStore``: media in cloud object storage (S3, GCS, Azure...) behind signed URLs.

The store talks to a small backend object with three async methods, the interface of
`cloud-storage-manager`'s ``BaseCloudStorage`` (which 10xGraph uses):

* ``upload(file_path, cloud_path)``: upload a local file to ``cloud_path``;
* ``delete(cloud_path)``: delete an object;
* ``get_public_url(cloud_path, expiration=3600)``: a signed URL (seconds of validity).

tenxgraph ships one such backend, :class:`~tenxgraph.storage.media.storage.s3.S3Storage`
(boto3, any S3-compatible server). Objects are laid out as
``{prefix}/{key[0:2]}/{key[2:4]}/{key}{ext}`` with a ``{key}.meta.json`` sidecar
(``mime_type``, ``size_bytes``, ``ext`` and the caller's metadata), the sidecar uploaded last.
Reads go through signed URLs, fetched with httpx.

With the default prefix (``10xgraph-media``), objects written under the prefix 10xGraph used
before its rename (``agentflow-media``) stay readable: a key missing under the new prefix is
looked up under the old one, and remembered there for this store's lifetime.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import uuid
from collections.abc import Awaitable
from typing import Any, Protocol

import httpx

from tenxgraph.core.exceptions import MediaError, MediaNotFoundError

from .base import BaseMediaStore, _mime_to_ext, check_key

__all__ = ["CloudMediaStore", "CloudStorageBackend", "_mime_to_ext"]

logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "10xgraph-media"
LEGACY_PREFIX = "agentflow-media"
#: Validity in seconds of the signed URLs the store itself uses to read an object.
_READ_URL_S = 300


class CloudStorageBackend(Protocol):
    """What :class:`CloudMediaStore` needs from a cloud backend (see the module docstring)."""

    def upload(self, file_path: str, cloud_path: str) -> Awaitable[Any]:
        """Upload the local file ``file_path`` to ``cloud_path``."""
        ...

    def delete(self, cloud_path: str) -> Awaitable[Any]:
        """Delete the object at ``cloud_path``."""
        ...

    def get_public_url(self, cloud_path: str, expiration: int = 3600) -> Awaitable[str]:
        """A signed GET URL for ``cloud_path``, valid ``expiration`` seconds."""
        ...


class CloudMediaStore(BaseMediaStore):
    """Media in cloud object storage (module docstring).

    Args:
        storage: the backend (:class:`CloudStorageBackend`), e.g. ``S3Storage(bucket=...)``.
        prefix: the object-name prefix (default ``"10xgraph-media"``); with the default,
            reads fall back to the legacy ``"agentflow-media"`` prefix.
        timeout_s: bound in seconds on each download through a signed URL (default 60).
    """

    def __init__(
        self,
        storage: CloudStorageBackend,
        prefix: str = DEFAULT_PREFIX,
        *,
        timeout_s: float = 60.0,
    ) -> None:
        self.storage = storage
        self.prefix = prefix.strip("/")
        self.timeout_s = timeout_s
        self._located: dict[str, str] = {}  # key -> prefix it was found under (legacy keys)

    # -- layout -------------------------------------------------------------------------------
    def _cloud_path(self, key: str, ext: str, prefix: str | None = None) -> str:
        return f"{prefix or self.prefix}/{key[:2]}/{key[2:4]}/{key}{ext}"

    def _meta_cloud_path(self, key: str, prefix: str | None = None) -> str:
        return self._cloud_path(key, ".meta.json", prefix)

    def _prefixes(self, key: str) -> list[str]:
        if key in self._located:
            return [self._located[key]]
        if self.prefix == DEFAULT_PREFIX:
            return [self.prefix, LEGACY_PREFIX]
        return [self.prefix]

    # -- I/O ----------------------------------------------------------------------------------
    async def _download_from_url(self, url: str) -> bytes:
        """GET ``url`` (a signed URL) and return the body; raises on a non-2xx answer."""
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            response = await client.get(url)
            response.raise_for_status()
            return response.content

    async def _download_meta(self, key: str, prefix: str | None = None) -> dict[str, Any] | None:
        """The sidecar of ``key`` under ``prefix`` (default: the store's), or ``None`` when
        it cannot be read (absent, or the backend or the download failed: logged)."""
        try:
            url = await self.storage.get_public_url(
                self._meta_cloud_path(key, prefix), expiration=_READ_URL_S
            )
            meta = json.loads(await self._download_from_url(url))
        except Exception as exc:  # any backend or HTTP failure means "not readable here"
            logger.debug("media sidecar of %s not readable under %s: %s", key, prefix, exc)
            return None
        return meta if isinstance(meta, dict) else None

    async def _locate(self, key: str) -> tuple[str, dict[str, Any]] | None:
        check_key(key)
        for prefix in self._prefixes(key):
            meta = await self._download_meta(key, prefix)
            if meta is not None:
                if prefix != self.prefix:
                    self._located[key] = prefix
                return prefix, meta
        return None

    async def _upload_bytes(self, data: bytes, cloud_path: str) -> None:
        fd, tmp = tempfile.mkstemp(prefix="tenxgraph-media-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            await self.storage.upload(tmp, cloud_path)
        except Exception as exc:  # the backend's own error family, translated here once
            raise MediaError(
                f"upload to the cloud media store failed: {type(exc).__name__}: {exc}",
                context={"path": cloud_path, "backend": type(self.storage).__name__},
            ) from exc
        finally:
            os.unlink(tmp)

    # -- BaseMediaStore -----------------------------------------------------------------------
    async def store(
        self, data: bytes, mime_type: str, metadata: dict[str, Any] | None = None
    ) -> str:
        """Upload ``data`` then its sidecar; see :meth:`BaseMediaStore.store`.

        Raises:
            MediaError: ``MEDIA_000`` when the backend fails (its error chained, its message
                redacted); temporary files are removed either way. Bytes uploaded before a
                failed sidecar upload stay unreferenced (no key was returned).
        """
        key = uuid.uuid4().hex
        ext = _mime_to_ext(mime_type)
        meta = {**(metadata or {}), "mime_type": mime_type, "size_bytes": len(data), "ext": ext}
        await self._upload_bytes(bytes(data), self._cloud_path(key, ext))
        await self._upload_bytes(json.dumps(meta).encode(), self._meta_cloud_path(key))
        return key

    async def retrieve(self, key: str) -> tuple[bytes, str]:
        """See :meth:`BaseMediaStore.retrieve`.

        Raises:
            MediaNotFoundError: ``MEDIA_NOT_FOUND_000`` when no sidecar is readable.
            MediaError: ``MEDIA_000`` when the sidecar exists but the bytes cannot be read.
        """
        found = await self._locate(key)
        if found is None:
            raise MediaNotFoundError(f"Media not found: {key}", context={"key": key})
        prefix, meta = found
        path = self._cloud_path(key, str(meta.get("ext", "")), prefix)
        try:
            url = await self.storage.get_public_url(path, expiration=_READ_URL_S)
            data = await self._download_from_url(url)
        except Exception as exc:
            raise MediaError(
                f"media {key} has metadata but its bytes could not be read: {type(exc).__name__}",
                context={"key": key, "backend": type(self.storage).__name__},
            ) from exc
        return data, str(meta.get("mime_type") or "application/octet-stream")

    async def delete(self, key: str) -> bool:
        """Delete the bytes and the sidecar; see :meth:`BaseMediaStore.delete`."""
        found = await self._locate(key)
        if found is None:
            return False
        prefix, meta = found
        await self.storage.delete(self._cloud_path(key, str(meta.get("ext", "")), prefix))
        await self.storage.delete(self._meta_cloud_path(key, prefix))
        self._located.pop(key, None)
        return True

    async def exists(self, key: str) -> bool:
        """See :meth:`BaseMediaStore.exists`."""
        return await self._locate(key) is not None

    async def get_metadata(self, key: str) -> dict[str, Any] | None:
        """The sidecar's content; see :meth:`BaseMediaStore.get_metadata`."""
        found = await self._locate(key)
        return found[1] if found else None

    async def get_public_url(self, key: str, expiration: int = 3600) -> str:
        """A signed URL of the object, valid ``expiration`` seconds (extension from its
        sidecar).

        Raises:
            MediaNotFoundError: ``MEDIA_NOT_FOUND_000`` when the key is unknown.
        """
        found = await self._locate(key)
        if found is None:
            raise MediaNotFoundError(f"Media not found: {key}", context={"key": key})
        prefix, meta = found
        path = self._cloud_path(key, str(meta.get("ext", "")), prefix)
        return await self.storage.get_public_url(path, expiration=expiration)

    async def get_direct_url(
        self, key: str, mime_type: str | None = None, expiration: int = 3600
    ) -> str | None:
        """A signed URL built from ``mime_type`` without reading the sidecar (one backend
        call); without ``mime_type`` it is :meth:`get_public_url`."""
        if mime_type is None:
            return await self.get_public_url(key, expiration=expiration)
        check_key(key)
        prefix = self._located.get(key, self.prefix)
        path = self._cloud_path(key, _mime_to_ext(mime_type), prefix)
        return await self.storage.get_public_url(path, expiration=expiration)
