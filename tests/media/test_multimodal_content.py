"""Multimodal messages: building them, turning them into prompt dicts and provider parts,
offloading their media, and checking and reshaping images."""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state import (
    AgentState,
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    Message,
    TextBlock,
    VideoBlock,
)
from tenxgraph.models._gemini_parts import content_parts_to_gemini
from tenxgraph.runtime.adapters.llm.google_genai_converter import GoogleGenAIConverter
from tenxgraph.runtime.adapters.llm.openai_converter import OpenAIConverter
from tenxgraph.runtime.adapters.llm.openai_responses_converter import OpenAIResponsesConverter
from tenxgraph.storage.media import (
    InMemoryMediaStore,
    MediaOffloadPolicy,
    MediaProcessor,
    MediaRefResolver,
    MultimodalConfig,
    ProviderMediaCache,
    enforce_file_size,
    ensure_media_offloaded,
    sanitize_filename,
    validate_magic_bytes,
)
from tenxgraph.utils.converter import (
    _convert_dict,
    convert_messages,
    resolve_media_refs,
    strip_media_blocks,
)

pytestmark = pytest.mark.anyio


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def inline(data: bytes, mime: str) -> MediaRef:
    return MediaRef(kind="data", data_base64=b64(data), mime_type=mime)


def picture(width: int, height: int, fmt: str = "PNG", **save: Any) -> bytes:
    image = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    image.new("RGB", (width, height), (10, 200, 30)).save(buf, format=fmt, **save)
    return buf.getvalue()


# -- building messages ---------------------------------------------------------------------------
def test_image_message_puts_text_first_and_needs_a_source() -> None:
    msg = Message.image_message(image_url="https://cdn.test/cat.jpg", text="Which breed?")
    assert [b.type for b in msg.content] == ["text", "image"]
    assert msg.content[1].media.url == "https://cdn.test/cat.jpg"
    assert (
        Message.image_message(image_base64="AAAA", mime_type="image/gif").content[0].media.kind
        == "data"
    )
    with pytest.raises(ValueError, match="image_url or image_base64"):
        Message.image_message(text="nothing attached")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("scan.png", ImageBlock),
        ("memo.wav", AudioBlock),
        ("clip.mp4", VideoBlock),
        ("r.pdf", DocumentBlock),
    ],
)
def test_from_file_picks_the_block_by_type(tmp_path: Path, name: str, kind: type) -> None:
    path = tmp_path / name
    path.write_bytes(b"payload")
    msg = Message.from_file(path, text="see attached")
    block = msg.content[1]
    assert isinstance(block, kind)
    assert block.media.filename == name and base64.b64decode(block.media.data_base64) == b"payload"
    with pytest.raises(FileNotFoundError):
        Message.from_file(tmp_path / "missing.png")


async def test_store_backed_constructors_keep_only_a_reference(tmp_path: Path) -> None:
    store = InMemoryMediaStore()
    msg = await Message.with_image(b"J" * 2_000_000, "image/jpeg", store, text="big one")
    assert len(msg.model_dump_json()) < 600 and len(store) == 1
    (tmp_path / "notes.pdf").write_bytes(b"%PDF-1.7 notes")
    doc = await Message.with_file(tmp_path / "notes.pdf", store)
    assert isinstance(doc.content[0], DocumentBlock)
    key = doc.content[0].media.url.removeprefix("graph://media/")
    assert await store.retrieve(key) == (b"%PDF-1.7 notes", "application/pdf")
    assert (await store.get_metadata(key))["filename"] == "notes.pdf"


def test_attach_media_appends_in_place() -> None:
    msg = Message.text_message("listen")
    assert msg.attach_media(inline(b"RIFF", "audio/wav")) is msg
    assert isinstance(msg.content[-1], AudioBlock)
    with pytest.raises(ValueError):
        msg.attach_media(inline(b"x", "image/png"), as_type="hologram")  # type: ignore[arg-type]


# -- prompt dicts --------------------------------------------------------------------------------
def test_prompt_dicts_keep_text_as_strings_and_media_as_parts() -> None:
    state = AgentState(
        context=[
            Message.text_message("hi"),
            Message(
                role="user",
                content=[
                    TextBlock(text="Read these"),
                    ImageBlock(media=inline(b"\x89PNG", "image/png")),
                    DocumentBlock(media=inline(b"%PDF", "application/pdf"), excerpt="Page one."),
                    VideoBlock(media=MediaRef(kind="url", url="https://v.test/a.mp4")),
                    AudioBlock(media=inline(b"ID3", "audio/mpeg")),
                ],
            ),
        ]
    )
    out = convert_messages([{"role": "system", "content": "Be brief."}], state)
    assert out[1] == {"role": "user", "content": "hi"}
    parts = out[2]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "text", "video", "input_audio"]
    assert parts[1]["image_url"]["url"] == "data:image/png;base64," + b64(b"\x89PNG")
    assert parts[2]["text"] == "Page one." and parts[4]["input_audio"]["format"] == "mp3"
    # a text-only model gets the text alone
    assert strip_media_blocks(out)[2]["content"] == [
        {"type": "text", "text": "Read these"},
        {"type": "text", "text": "Page one."},
    ]


def test_assistant_text_stays_a_string_even_with_media() -> None:
    msg = Message(
        role="assistant",
        content=[TextBlock(text="Here."), ImageBlock(media=inline(b"x", "image/png"))],
    )
    assert _convert_dict(msg)["content"] == "Here."


async def test_resolving_references_copies_messages_and_leaves_state_alone() -> None:
    store = InMemoryMediaStore()
    original = await Message.with_image(b"\x89PNG data", "image/png", store)
    plain = Message.text_message("no media")
    resolved = await resolve_media_refs([original, plain], MediaRefResolver(store))
    assert resolved[1] is plain and resolved[0] is not original
    assert resolved[0].content[0].media.data_base64 == b64(b"\x89PNG data")
    assert original.content[0].media.kind == "url"


# -- offloading ----------------------------------------------------------------------------------
async def test_offload_policies() -> None:
    store = InMemoryMediaStore()
    big, small = b"B" * 60_000, b"s" * 10

    def message() -> Message:
        return Message(
            role="user",
            content=[
                ImageBlock(media=inline(big, "image/png")),
                AudioBlock(media=inline(small, "audio/wav")),
                ImageBlock(media=MediaRef(kind="url", url="https://cdn.test/x.png")),
            ],
        )

    kept = await ensure_media_offloaded(message(), store, policy=MediaOffloadPolicy.NEVER)
    assert [b.media.kind for b in kept.content] == ["data", "data", "url"] and len(store) == 0
    default = await ensure_media_offloaded(message(), store)
    assert [b.media.kind for b in default.content] == ["url", "data", "url"] and len(store) == 1
    assert default.content[0].media.size_bytes == 60_000
    every = await ensure_media_offloaded(message(), store, policy="always")
    assert [b.media.kind for b in every.content] == ["url", "url", "url"] and len(store) == 3
    assert every.content[2].media.url == "https://cdn.test/x.png"


async def test_offload_refuses_broken_base64_before_storing() -> None:
    store = InMemoryMediaStore()
    bad = Message(role="user", content=[ImageBlock(media=MediaRef(kind="data", data_base64="@@@"))])
    with pytest.raises(ValidationError):
        await ensure_media_offloaded(bad, store, policy=MediaOffloadPolicy.ALWAYS)
    assert len(store) == 0


# -- images ----------------------------------------------------------------------------------------
def test_processor_checks_type_and_size() -> None:
    proc = MediaProcessor(MultimodalConfig(max_image_size_mb=1))
    with pytest.raises(ValidationError, match="Unsupported image type"):
        proc.validate_image(
            ImageBlock(media=MediaRef(url="https://x.test/a.tif", mime_type="image/tiff"))
        )
    with pytest.raises(ValidationError, match="Image too large"):
        proc.validate_image(
            ImageBlock(media=MediaRef(url="https://x.test/a.png", size_bytes=2 << 20))
        )
    proc.validate_image(ImageBlock(media=MediaRef(url="https://x.test/a.png", size_bytes=1 << 20)))


def test_processor_resizes_reencodes_and_rotates() -> None:
    proc = MediaProcessor(MultimodalConfig(max_image_dimension=300))
    wide = ImageBlock(media=inline(picture(1200, 600), "image/png"), alt_text="banner")
    small = proc.process(wide)
    assert (small.media.width, small.media.height) == (300, 150)
    assert small.alt_text == "banner" and wide.media.width is None  # the input is untouched
    thumb = proc.generate_thumbnail(wide, max_dim=64)
    assert (
        thumb.media.mime_type == "image/jpeg" and max(thumb.media.width, thumb.media.height) == 64
    )
    webp = proc.optimize_image(wide, target_format="WEBP", quality=60)
    assert webp.media.mime_type == "image/webp"
    assert base64.b64decode(webp.media.data_base64)[8:12] == b"WEBP"
    piexif = pytest.importorskip("piexif")
    exif = piexif.dump({"0th": {piexif.ImageIFD.Orientation: 8}})
    sideways = ImageBlock(media=inline(picture(120, 40, "JPEG", exif=exif), "image/jpeg"))
    upright = proc.fix_orientation(sideways)
    assert (upright.media.width, upright.media.height) == (40, 120)
    assert proc.fix_orientation(upright) is upright


def test_upload_checks() -> None:
    assert validate_magic_bytes(b"%PDF-1.4 ...", "application/pdf")
    assert not validate_magic_bytes(b"%PDF-1.4 ...", "image/png")
    assert validate_magic_bytes(b"RIFF\x00\x00\x00\x00WAVEfmt ", "audio/wav")
    assert sanitize_filename("..\\..\\boot.ini") == "boot.ini"
    assert sanitize_filename("a\x00b/../c.txt") == "c.txt"
    assert sanitize_filename("") == "unnamed"
    assert sanitize_filename("x" * 400 + ".jpeg").endswith(".jpeg")
    with pytest.raises(ValidationError) as info:
        enforce_file_size(b"z" * 2048, max_mb=0.001)
    assert info.value.context["size_bytes"] == 2048


def test_provider_cache_evicts_the_least_recently_used() -> None:
    cache = ProviderMediaCache(max_entries=2)
    cache.put("google", "a", "files/a")
    cache.put("google", "b", "files/b")
    assert cache.get("google", "a") == "files/a"  # a is now the most recent
    cache.put("openai", "c", "file-c")
    assert cache.get("google", "b") is None and cache.get("google", "a") == "files/a"
    assert ProviderMediaCache.content_key(b"x") == ProviderMediaCache.content_key(b"x")


# -- provider parts and answers ---------------------------------------------------------------------
@pytest.fixture
def image_server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self.send_response(200)
            self.send_header("Content-Type", "image/gif; charset=binary")
            self.end_headers()
            self.wfile.write(b"GIF89a-pixels")

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/p.gif"
    httpd.shutdown()
    httpd.server_close()


def test_gemini_parts_inline_data_and_fetched_urls(image_server: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/gone.png"
    parts = content_parts_to_gemini(
        [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(b"PNG")}},
            {"type": "image_url", "image_url": {"url": image_server}},
            {"type": "image_url", "image_url": {"url": closed}},
            {"type": "input_audio", "input_audio": {"data": b64(b"OggS"), "format": "ogg"}},
        ]
    )
    assert parts[0] == {"text": "look"}
    assert parts[1] == {"inline_data": {"mime_type": "image/png", "data": b"PNG"}}
    assert parts[2] == {"inline_data": {"mime_type": "image/gif", "data": b"GIF89a-pixels"}}
    assert parts[3] == {"file_data": {"file_uri": closed, "mime_type": "image/jpeg"}}
    assert parts[4]["inline_data"]["mime_type"] == "audio/ogg"


async def test_response_converters_return_media_blocks() -> None:
    gemini = SimpleNamespace(
        candidates=[
            SimpleNamespace(
                content=SimpleNamespace(
                    parts=[
                        SimpleNamespace(text="plan", thought=True),
                        SimpleNamespace(text="Drawn:"),
                        SimpleNamespace(
                            inline_data=SimpleNamespace(data=b"\x89PNG", mime_type="image/png")
                        ),
                    ]
                ),
                finish_reason="STOP",
            )
        ],
        usage_metadata=SimpleNamespace(
            prompt_token_count=3, candidates_token_count=4, total_token_count=7
        ),
    )
    msg = await GoogleGenAIConverter().convert_response(gemini)
    assert [b.type for b in msg.content] == ["reasoning", "text", "image"]
    assert msg.content[2].media.data_base64 == b64(b"\x89PNG") and msg.usages.total_tokens == 7

    responses = {
        "output": [
            {
                "type": "message",
                "content": [
                    {"type": "output_text", "text": "Said:"},
                    {"type": "output_audio", "data": "UklGRg==", "transcript": "hi"},
                ],
            },
            {"type": "function_call", "name": "lookup", "arguments": '{"q": 1}', "call_id": "c1"},
        ]
    }
    msg = await OpenAIResponsesConverter().convert_response(responses)
    assert [b.type for b in msg.content] == ["text", "tool_call", "audio"]
    assert msg.tool_calls()[0].args == {"q": 1} and msg.content[2].transcript == "hi"

    chat = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "Spoken.",
                    "audio": {"data": "UklGRg==", "transcript": "Spoken."},
                },
                "finish_reason": "stop",
            }
        ]
    }
    msg = await OpenAIConverter().convert_response(chat)
    assert [b.type for b in msg.content] == ["text", "audio"]
    assert json.loads(msg.model_dump_json())["content"][1]["media"]["mime_type"] == "audio/wav"
