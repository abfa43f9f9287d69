"""The media stores keep bytes by key, behind one contract: in memory, local files, and cloud
object storage (S3 wire protocol against a local S3 server)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from tenxgraph.core.exceptions import MediaError, MediaNotFoundError, ValidationError
from tenxgraph.storage.media import (
    BaseMediaStore,
    CloudMediaStore,
    InMemoryMediaStore,
    LocalFileMediaStore,
    MediaRefResolver,
)
from tenxgraph.storage.media.storage.s3 import S3Storage

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "local", "s3"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BaseMediaStore]:
    if request.param == "memory":
        yield InMemoryMediaStore()
    elif request.param == "local":
        yield LocalFileMediaStore(base_dir=tmp_path / "media")
    else:
        bucket, kwargs = request.getfixturevalue("s3_bucket")
        yield CloudMediaStore(S3Storage(bucket, **kwargs), prefix="app-media")


async def test_bytes_come_back_under_their_key(store: BaseMediaStore) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
    key = await store.store(png, "image/png", {"owner": "alice"})
    assert len(key) == 32 and int(key, 16) >= 0
    assert await store.exists(key)
    assert await store.retrieve(key) == (png, "image/png")
    meta = await store.get_metadata(key)
    assert meta is not None and meta["mime_type"] == "image/png"
    assert meta["size_bytes"] == len(png)
    other = await store.store(b"%PDF-1.7 x", "application/pdf")
    assert other != key and (await store.retrieve(other))[1] == "application/pdf"


async def test_deleted_media_is_gone_and_a_second_delete_says_so(store: BaseMediaStore) -> None:
    key = await store.store(b"RIFF....WAVE", "audio/wav")
    assert await store.delete(key) is True
    assert not await store.exists(key)
    assert await store.get_metadata(key) is None
    assert await store.delete(key) is False
    with pytest.raises(MediaNotFoundError) as info:
        await store.retrieve(key)
    assert isinstance(info.value, KeyError) and info.value.error_code == "MEDIA_NOT_FOUND_000"
    assert str(info.value).startswith("[MEDIA_NOT_FOUND_000] Media not found")


async def test_the_reference_a_message_keeps_is_small(store: BaseMediaStore) -> None:
    key = await store.store(b"x" * 500_000, "image/jpeg")
    ref = store.to_media_ref(key, "image/jpeg", size_bytes=500_000, filename="big.jpg")
    assert ref.url == f"graph://media/{key}" and ref.kind == "url"
    assert len(ref.model_dump_json()) < 400


@pytest.mark.parametrize("key", ["../../etc/passwd", "a/b/cdef", "..", "abc", "x" * 129])
async def test_file_stores_refuse_keys_that_are_not_keys(key: str, tmp_path: Path) -> None:
    store = LocalFileMediaStore(base_dir=tmp_path)
    for op in (store.retrieve, store.exists, store.delete):
        with pytest.raises(ValidationError, match="Invalid storage key"):
            await op(key)
    assert [p async for p in anyio.Path(tmp_path).iterdir()] == []


async def test_local_store_shards_files_and_writes_a_sidecar(tmp_path: Path) -> None:
    store = LocalFileMediaStore(base_dir=tmp_path)
    key = await store.store(b"abc", "image/webp", {"source": "upload"})
    shard = tmp_path / key[:2] / key[2:4]
    assert sorted(p.name for p in shard.iterdir()) == [f"{key}.meta.json", f"{key}.webp"]
    sidecar = json.loads((shard / f"{key}.meta.json").read_text())
    assert sidecar == {
        "source": "upload",
        "mime_type": "image/webp",
        "size_bytes": 3,
        "ext": ".webp",
    }


async def test_s3_objects_are_laid_out_under_the_prefix(s3_bucket: tuple[str, dict]) -> None:
    import boto3

    bucket, kwargs = s3_bucket
    store = CloudMediaStore(S3Storage(bucket, **kwargs), prefix="app-media")
    key = await store.store(b"\xff\xd8\xff photo", "image/jpeg")
    listed = boto3.client("s3", **kwargs).list_objects_v2(Bucket=bucket)["Contents"]
    names = sorted(o["Key"] for o in listed)
    base = f"app-media/{key[:2]}/{key[2:4]}/{key}"
    assert names == [f"{base}.jpg", f"{base}.meta.json"]
    # the signed URL a provider would be given serves the bytes
    url = await store.get_direct_url(key, mime_type="image/jpeg", expiration=60)
    assert url is not None and ("Signature=" in url or "X-Amz-Signature=" in url)
    async with httpx.AsyncClient() as client:
        assert (await client.get(url)).content == b"\xff\xd8\xff photo"


async def test_s3_reads_fall_back_to_the_legacy_prefix(s3_bucket: tuple[str, dict]) -> None:
    """Objects an older deployment wrote under ``agentflow-media/`` stay readable when the
    store uses the default prefix."""
    bucket, kwargs = s3_bucket
    legacy = CloudMediaStore(S3Storage(bucket, **kwargs), prefix="agentflow-media")
    key = await legacy.store(b"old bytes", "text/plain")
    current = CloudMediaStore(S3Storage(bucket, **kwargs))
    assert await current.retrieve(key) == (b"old bytes", "text/plain")
    assert "agentflow-media/" in str(await current.get_direct_url(key, "text/plain"))
    assert await current.delete(key) is True
    assert not await legacy.exists(key)
    fresh = await current.store(b"new", "text/plain")
    assert await legacy.exists(fresh) is False  # new writes go under 10xgraph-media/


async def test_s3_store_errors_name_the_key_not_the_url(s3_bucket: tuple[str, dict]) -> None:
    bucket, kwargs = s3_bucket
    store = CloudMediaStore(S3Storage(bucket, **kwargs))
    with pytest.raises(MediaNotFoundError) as info:
        await store.retrieve("0" * 32)
    assert info.value.context == {"key": "0" * 32}
    with pytest.raises(MediaNotFoundError):
        await store.get_public_url("0" * 32)


async def test_resolver_inlines_store_bytes_or_hands_out_signed_urls(
    s3_bucket: tuple[str, dict],
) -> None:
    memory = InMemoryMediaStore()
    key = await memory.store(b"\x89PNG-bytes", "image/png")
    part = await MediaRefResolver(memory).resolve_for_openai(memory.to_media_ref(key, "image/png"))
    assert part["image_url"]["url"] == "data:image/png;base64,iVBORy1ieXRlcw=="

    bucket, kwargs = s3_bucket
    cloud = CloudMediaStore(S3Storage(bucket, **kwargs))
    key = await cloud.store(b"\x89PNG-bytes", "image/png")
    part = await MediaRefResolver(cloud).resolve_for_openai(cloud.to_media_ref(key, "image/png"))
    assert part["image_url"]["url"].startswith(kwargs["endpoint_url"])

    with pytest.raises(MediaError) as info:
        await MediaRefResolver().resolve_for_openai(cloud.to_media_ref(key, "image/png"))
    assert info.value.error_code == "MEDIA_001" and isinstance(info.value, RuntimeError)


async def test_s3_backend_failures_become_media_errors(s3_bucket: tuple[str, dict]) -> None:
    _, kwargs = s3_bucket
    store = CloudMediaStore(S3Storage("no-such-bucket-here", **kwargs))
    with pytest.raises(MediaError) as info:
        await store.store(b"bytes", "image/png")
    assert info.value.error_code == "MEDIA_000"
    assert info.value.context["backend"] == "S3Storage"
    assert "secret" not in str(info.value).lower()
