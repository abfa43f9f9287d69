"""``Agent(multimodal_config=...)``: what the model receives for images and documents, and
file ids naming media-store keys; the thread's state is never changed by it."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest

from tenxgraph.core.exceptions import GraphError, UnsupportedArgumentError, ValidationError
from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.state import AgentState, DocumentBlock, ImageBlock, MediaRef, Message, TextBlock
from tenxgraph.models import ScriptedModel
from tenxgraph.storage.media import (
    BaseMediaStore,
    DocumentHandling,
    ImageHandling,
    InMemoryMediaStore,
    MultimodalConfig,
)
from tenxgraph.utils import END, START

pytestmark = pytest.mark.anyio


def png(width: int, height: int) -> bytes:
    image = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    image.new("RGB", (width, height), (200, 20, 20)).save(buf, format="PNG")
    return buf.getvalue()


def inline(data: bytes, mime: str) -> MediaRef:
    return MediaRef(kind="data", data_base64=base64.b64encode(data).decode(), mime_type=mime)


async def run(
    blocks: list[Any], config: MultimodalConfig | None, store: BaseMediaStore | None = None
) -> tuple[list[Any], AgentState]:
    """Send one user message; return the blocks the model received and the final state."""
    model = ScriptedModel(["ok"])
    graph = StateGraph(AgentState)
    graph.add_node("agent", Agent(model=model, multimodal_config=config))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    app = graph.compile(media_store=store)
    msg = Message(role="user", content=[TextBlock(text="look"), *blocks])
    await app.ainvoke({"messages": [msg]}, config={"thread_id": "t"})
    state = await app.aget_state({"thread_id": "t"})
    return list(model.calls[0]["messages"][-1].content[1:]), state


async def test_images_are_scaled_for_the_model_only() -> None:
    big = ImageBlock(media=inline(png(3000, 1500), "image/png"))
    sent, state = await run([big], MultimodalConfig(max_image_dimension=600))
    assert (sent[0].media.width, sent[0].media.height) == (600, 300)
    assert state.context[0].content[1] == big  # the state keeps the original


async def test_images_the_config_refuses_stop_the_call() -> None:
    gif = ImageBlock(media=inline(b"GIF89a....", "image/gif"))
    with pytest.raises(ValidationError, match="Unsupported image type"):
        await run([gif], MultimodalConfig(supported_image_types={"image/png"}))


@pytest.mark.parametrize(
    ("handling", "expected"),
    [
        (DocumentHandling.SKIP, []),
        (DocumentHandling.EXTRACT_TEXT, [("notes", None)]),
        (DocumentHandling.FORWARD_RAW, [(None, "text/plain")]),
    ],
)
async def test_document_handling(handling: DocumentHandling, expected: list[Any]) -> None:
    doc = DocumentBlock(media=inline(b"notes", "text/plain"))
    sent, _ = await run([doc], MultimodalConfig(document_handling=handling))
    got = [(b.text, b.media.mime_type if b.text is None else None) for b in sent]
    assert got == expected


async def test_extract_text_refuses_documents_outside_the_accepted_types() -> None:
    sheet = DocumentBlock(media=inline(b"PK\x03\x04", "application/vnd.ms-excel"))
    with pytest.raises(ValidationError, match="Unsupported document type"):
        await run([sheet], MultimodalConfig())
    pdf = DocumentBlock(media=inline(b"%PDF-1.4", "application/pdf"))
    sent, _ = await run([pdf], MultimodalConfig())
    assert sent == [pdf]  # a PDF goes to the provider, which reads it


async def test_file_ids_of_the_media_store_are_read_back() -> None:
    store = InMemoryMediaStore()
    key = await store.store(b"\x89PNG-bytes", "image/png")
    mine = ImageBlock(media=MediaRef(kind="file_id", file_id=key, mime_type="image/png"))
    theirs = ImageBlock(media=MediaRef(kind="file_id", file_id="file-abc123"))
    sent, state = await run([mine, theirs], None, store)
    assert sent[0].media.kind == "data"
    assert base64.b64decode(sent[0].media.data_base64) == b"\x89PNG-bytes"
    assert sent[1] == theirs  # a provider's own file id passes through
    assert state.context[0].content[1].media.kind == "file_id"


async def test_agent_checks_its_multimodal_config() -> None:
    with pytest.raises(GraphError) as info:
        Agent(model=ScriptedModel(["x"]), multimodal_config={"image_handling": "url"})
    assert info.value.error_code == "GRAPH_001"
    with pytest.raises(UnsupportedArgumentError) as unsupported:
        Agent(
            model=ScriptedModel(["x"]),
            multimodal_config=MultimodalConfig(image_handling=ImageHandling.FILE_ID),
        )
    assert unsupported.value.error_code == "GRAPH_010"


async def test_url_handling_sends_a_signed_url_from_a_cloud_store(
    s3_bucket: tuple[str, dict[str, str]],
) -> None:
    from tenxgraph.storage.media import CloudMediaStore
    from tenxgraph.storage.media.storage.s3 import S3Storage

    bucket, kwargs = s3_bucket
    store = CloudMediaStore(S3Storage(bucket, **kwargs))
    photo = (await Message.with_image(png(40, 40), "image/png", store)).content[0]
    sent, _ = await run([photo], MultimodalConfig(image_handling=ImageHandling.URL), store)
    assert sent[0].media.kind == "url"
    assert str(sent[0].media.url).startswith(kwargs["endpoint_url"] + "/")
    sent, _ = await run([photo], MultimodalConfig(), store)  # BASE64: the bytes themselves
    assert sent[0].media.kind == "data"
