"""Images and PDFs reach Gemini and Claude in their own wire shapes, read back from the media
store: the thread keeps a ``graph://media/`` reference, the request the local wire server
receives carries the bytes (Gemini ``inlineData``, Claude ``image`` / ``document`` blocks)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.state import DocumentBlock, ImageBlock, MediaRef, Message, TextBlock
from tenxgraph.models.openai_compat import to_openai_messages
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.storage.media import InMemoryMediaStore
from tenxgraph.utils import END, START

from ._crash_child import MODELS
from ._wire_servers import Answer, AnthropicServer, GeminiServer

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 300  # ~77 KB: offloaded by the store
PDF = b"%PDF-1.4\n" + b"0" * 200


@pytest.fixture(params=["google", "anthropic"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    srv = GeminiServer() if request.param == "google" else AnthropicServer()
    yield request.param, srv
    srv.close()


def question() -> Message:
    def ref(data: bytes, mime: str) -> MediaRef:
        return MediaRef(kind="data", data_base64=base64.b64encode(data).decode(), mime_type=mime)

    return Message(
        role="user",
        content=[
            TextBlock(text="Compare the chart with the report."),
            ImageBlock(media=ref(PNG, "image/png")),
            DocumentBlock(media=ref(PDF, "application/pdf")),
        ],
    )


async def test_media_is_sent_in_the_providers_shape(
    server: tuple[str, Any], tmp_path: Path
) -> None:
    provider, srv = server
    srv.answers.append(Answer(text="They agree."))
    graph = StateGraph()
    graph.add_node(
        "MAIN", Agent(model=MODELS[provider], provider=provider, base_url=srv.url, api_key="k")
    )
    graph.add_edge(START, "MAIN")
    graph.add_edge("MAIN", END)
    media = InMemoryMediaStore()
    app = graph.compile(checkpointer=SqliteCheckpointer(tmp_path / "t.db"), media_store=media)
    await app.ainvoke({"messages": [question()]}, {"thread_id": "m"})

    state = await app.aget_state({"thread_id": "m"})
    assert str(state.context[0].content[1].media.url).startswith("graph://media/")
    assert state.context[-1].text() == "They agree." and len(media) == 1

    user = srv.requests[0]["contents" if provider == "google" else "messages"][0]
    if provider == "google":
        parts = user["parts"]
        assert parts[0] == {"text": "Compare the chart with the report."}

        def inline(part: dict[str, Any]) -> tuple[str, bytes]:
            # the SDK writes bytes in URL-safe base64 and may keep snake_case inner names;
            # protobuf's JSON mapping (Gemini's wire) reads both alphabets and both spellings
            blob = part["inlineData"]
            mime = blob.get("mimeType", blob.get("mime_type"))
            return mime, base64.urlsafe_b64decode(blob["data"])

        assert inline(parts[1]) == ("image/png", PNG)
        assert inline(parts[2]) == ("application/pdf", PDF)
    else:
        png64, pdf64 = base64.b64encode(PNG).decode(), base64.b64encode(PDF).decode()
        blocks = user["content"]
        assert blocks[0] == {"type": "text", "text": "Compare the chart with the report."}
        assert blocks[1] == {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": png64},
        }
        assert blocks[2]["type"] == "document"
        assert blocks[2]["source"] == {
            "type": "base64",
            "media_type": "application/pdf",
            "data": pdf64,
        }


def test_openai_compatible_wire_has_image_and_file_parts() -> None:
    wire = to_openai_messages([question()])[0]
    assert wire["role"] == "user"
    kinds = [p["type"] for p in wire["content"]]
    assert kinds == ["text", "image_url", "file"]
    assert wire["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert wire["content"][2]["file"]["file_data"].startswith("data:application/pdf;base64,")
