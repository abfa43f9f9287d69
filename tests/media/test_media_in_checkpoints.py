"""A graph compiled with a media store keeps images out of its checkpoints: the stored
message holds a ``graph://media/{key}`` reference (about a hundred bytes), the model still
receives the image's bytes, and later steps write only their own small messages.

Run on the embedded SQLite store and on PostgreSQL, reading the stored rows' sizes from the
database itself.
"""

from __future__ import annotations

import base64
import io
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import MediaError
from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.state import AgentState, ImageBlock, MediaRef, Message, TextBlock
from tenxgraph.models import ScriptedModel
from tenxgraph.storage.checkpointer import BaseCheckpointer, PgCheckpointer, SqliteCheckpointer
from tenxgraph.storage.media import InMemoryMediaStore, LocalFileMediaStore
from tenxgraph.utils import END, START

pytestmark = pytest.mark.anyio


def photo_bytes() -> bytes:
    """A 400x300 PNG of noise (about 360 KB, so it does not compress away)."""
    pil = pytest.importorskip("PIL.Image")
    import random

    rng = random.Random(7)
    img = pil.frombytes("RGB", (400, 300), bytes(rng.getrandbits(8) for _ in range(360_000)))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def photo_message(data: bytes) -> Message:
    media = MediaRef(
        kind="data", data_base64=base64.b64encode(data).decode(), mime_type="image/png"
    )
    return Message(
        role="user",
        content=[TextBlock(text="What is in this photo?"), ImageBlock(media=media)],
    )


def vision_graph(model: ScriptedModel) -> StateGraph:
    graph = StateGraph(AgentState)
    graph.add_node("vision", Agent(model=model))
    graph.add_edge(START, "vision")
    graph.add_edge("vision", END)
    return graph


class Stored:
    """Bytes of the message rows a store holds, read from the database."""

    def __init__(self, checkpointer: BaseCheckpointer[Any], size_sql: str, run: Any) -> None:
        self.checkpointer = checkpointer
        self._sql = size_sql
        self._run = run

    def message_bytes(self) -> int:
        return int(self._run(self._sql) or 0)


@pytest.fixture(params=["sqlite", "postgres"])
async def stored(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stored]:
    if request.param == "sqlite":
        path = tmp_path / "threads.db"
        cp: BaseCheckpointer[Any] = SqliteCheckpointer(path)

        def run(sql: str) -> Any:
            with sqlite3.connect(path) as conn:
                return conn.execute(sql).fetchone()[0]

        yield Stored(cp, "SELECT sum(length(data)) FROM messages", run)
    else:
        import psycopg

        dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
        cp = PgCheckpointer(postgres_dsn=dsn, schema=schema)

        def run(sql: str) -> Any:
            with psycopg.connect(dsn) as conn:
                row = conn.execute(sql).fetchone()
                return row[0] if row else None

        yield Stored(cp, f'SELECT sum(octet_length(data)) FROM "{schema}".tenxgraph_messages', run)
    await cp.aclose()


async def test_a_checkpoint_keeps_a_reference_not_the_image(stored: Stored, tmp_path: Path) -> None:
    data = photo_bytes()
    media = LocalFileMediaStore(base_dir=tmp_path / "media")
    model = ScriptedModel(["Grey noise.", "Still grey noise."])
    app = vision_graph(model).compile(checkpointer=stored.checkpointer, media_store=media)
    config = {"thread_id": "photo-1", "user_id": "alice"}

    await app.ainvoke({"messages": [photo_message(data)]}, config=config)

    state = await app.aget_state(config)
    image = state.context[0].content[1]
    assert isinstance(image, ImageBlock)
    assert image.media.kind == "url" and image.media.data_base64 is None
    key = image.media.url.removeprefix("graph://media/")
    assert image.media.size_bytes == len(data) and image.media.mime_type == "image/png"
    assert await media.retrieve(key) == (data, "image/png")
    # the whole thread (question with its image, answer) is stored in under 2 KB
    after_first = stored.message_bytes()
    assert after_first < 2_000, after_first
    # ... while the model was shown the photo itself
    sent = model.calls[0]["messages"][-1].content[1]
    assert sent.media.kind == "data" and base64.b64decode(sent.media.data_base64) == data

    # a second turn writes only its own two small messages (diff-only), nothing re-uploaded
    await app.ainvoke({"messages": [Message.text_message("And now?")]}, config=config)
    assert stored.message_bytes() - after_first < 1_500
    assert len(list((tmp_path / "media").rglob("*.meta.json"))) == 1
    second_prompt = model.calls[1]["messages"]
    assert any(
        isinstance(b, ImageBlock) and b.media.kind == "data"
        for m in second_prompt
        for b in m.content
    )


async def test_without_a_media_store_the_image_is_stored_inline(stored: Stored) -> None:
    data = photo_bytes()
    app = vision_graph(ScriptedModel(["Grey noise."])).compile(checkpointer=stored.checkpointer)
    await app.ainvoke({"messages": [photo_message(data)]}, config={"thread_id": "photo-2"})
    assert stored.message_bytes() > len(data)  # base64 inside the message row


async def test_small_images_stay_inline_under_the_default_threshold(stored: Stored) -> None:
    media = InMemoryMediaStore()
    app = vision_graph(ScriptedModel(["A dot."])).compile(
        checkpointer=stored.checkpointer, media_store=media
    )
    tiny = b"\x89PNG\r\n\x1a\n" + b"\x00" * 100
    await app.ainvoke({"messages": [photo_message(tiny)]}, config={"thread_id": "photo-3"})
    state = await app.aget_state({"thread_id": "photo-3"})
    assert state.context[0].content[1].media.kind == "data" and len(media) == 0


async def test_a_reference_without_a_media_store_fails_before_the_model_is_called() -> None:
    model = ScriptedModel(["never"])
    app = vision_graph(model).compile()
    ref = Message.image_message(image_url="graph://media/" + "ab" * 16, text="look")
    with pytest.raises(MediaError) as info:
        await app.ainvoke({"messages": [ref]}, config={"thread_id": "photo-4"})
    assert info.value.error_code == "MEDIA_001"
    assert model.calls == []


async def test_media_deleted_from_the_store_does_not_break_the_thread(
    stored: Stored, caplog: pytest.LogCaptureFixture
) -> None:
    """Retention removing old media leaves its threads usable: the model is told the media is
    gone, the stored reference stays, and a warning names the key."""
    data = photo_bytes()
    media = InMemoryMediaStore()
    model = ScriptedModel(["Grey noise.", "I can no longer see it."])
    app = vision_graph(model).compile(checkpointer=stored.checkpointer, media_store=media)
    config = {"thread_id": "photo-5", "user_id": "alice"}
    await app.ainvoke({"messages": [photo_message(data)]}, config=config)
    state = await app.aget_state(config)
    key = state.context[0].content[1].media.url.removeprefix("graph://media/")
    await media.delete(key)

    out = await app.ainvoke({"messages": [Message.text_message("And now?")]}, config=config)
    assert out["messages"][-1].text() == "I can no longer see it."
    first = model.calls[1]["messages"][0]
    assert [type(b).__name__ for b in first.content] == ["TextBlock", "TextBlock"]
    assert "no longer available" in first.content[1].text
    assert any(key in r.getMessage() for r in caplog.records)
    kept = (await app.aget_state(config)).context[0].content[1]
    assert isinstance(kept, ImageBlock) and kept.media.url == f"graph://media/{key}"
