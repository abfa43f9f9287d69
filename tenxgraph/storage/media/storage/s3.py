"""``S3Storage``: a :class:`~tenxgraph.storage.media.storage.cloud_store.CloudMediaStore`
backend over Amazon S3 or any S3-compatible server (MinIO, Ceph, moto), through boto3
(``pip install -e '.[s3]'``).

boto3 is synchronous; each call runs in a worker thread (``anyio.to_thread``), so the event
loop never blocks on the network. Signed URLs are S3 presigned ``GetObject`` URLs.
"""

from __future__ import annotations

import importlib
from typing import Any

import anyio

from tenxgraph.core.exceptions import MediaError

__all__ = ["S3Storage"]


def _boto3() -> Any:
    try:
        return importlib.import_module("boto3")
    except ImportError:
        raise MediaError(
            "S3Storage needs boto3: pip install -e '.[s3]' from the tenxgraph checkout",
            context={"backend": "S3Storage", "missing_package": "boto3"},
        ) from None


class S3Storage:
    """Objects of one S3 bucket, as a cloud-media backend.

    Args:
        bucket: the bucket name (it must exist).
        client: a boto3 S3 client to use; when ``None`` one is made with
            ``boto3.client("s3", **client_kwargs)``.
        **client_kwargs: passed to ``boto3.client`` (``endpoint_url``, ``region_name``,
            ``aws_access_key_id``, ``aws_secret_access_key``...; boto3 refuses unknown ones).
            Credentials may also come from boto3's usual environment variables and files.

    Raises:
        MediaError: ``MEDIA_000`` when boto3 is not installed.
    """

    def __init__(self, bucket: str, client: Any = None, **client_kwargs: Any) -> None:
        if client is not None and client_kwargs:
            raise TypeError("S3Storage takes either client= or boto3 client arguments, not both")
        self.bucket = bucket
        self.client = client if client is not None else _boto3().client("s3", **client_kwargs)

    def __repr__(self) -> str:
        return f"S3Storage(bucket={self.bucket!r})"

    async def upload(self, file_path: str, cloud_path: str) -> str:
        """Upload the local file ``file_path`` as object ``cloud_path``; returns the name."""
        await anyio.to_thread.run_sync(self.client.upload_file, file_path, self.bucket, cloud_path)
        return cloud_path

    async def delete(self, cloud_path: str) -> bool:
        """Delete object ``cloud_path`` (S3 answers the same whether or not it existed)."""
        await anyio.to_thread.run_sync(
            lambda: self.client.delete_object(Bucket=self.bucket, Key=cloud_path)
        )
        return True

    async def get_public_url(self, cloud_path: str, expiration: int = 3600) -> str:
        """A presigned ``GetObject`` URL for ``cloud_path``, valid ``expiration`` seconds."""
        url = await anyio.to_thread.run_sync(
            lambda: self.client.generate_presigned_url(
                "get_object",
                Params={"Bucket": self.bucket, "Key": cloud_path},
                ExpiresIn=int(expiration),
            )
        )
        return str(url)
