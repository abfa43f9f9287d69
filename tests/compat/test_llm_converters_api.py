"""``tenxgraph.runtime.adapters.llm``: BaseConverter, OpenAIConverter, ModelResponseConverter."""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state import Message
from tenxgraph.runtime.adapters.llm import (
    BaseConverter,
    ConverterType,
    ModelResponseConverter,
    OpenAIConverter,
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _completion(text: str) -> dict[str, Any]:
    return {
        "id": "r1",
        "model": "m",
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }


def _chunks() -> list[dict[str, Any]]:
    def delta(d: dict[str, Any]) -> dict[str, Any]:
        return {"id": "r2", "model": "m", "choices": [{"index": 0, "delta": d}]}

    return [
        delta({"content": "Hel"}),
        delta({"content": "lo"}),
        delta({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f"}}]}),
        delta({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]}),
    ]


def test_base_converter_is_abstract_and_names_five_families() -> None:
    with pytest.raises(TypeError):
        BaseConverter()  # type: ignore[abstract]
    assert {c.value for c in ConverterType} == {
        "openai",
        "anthropic",
        "google",
        "custom",
        "openai_responses",
    }


@pytest.mark.anyio
async def test_openai_converter_parses_a_completion_and_a_stream() -> None:
    conv = OpenAIConverter()
    msg = await conv.convert_response(_completion("hi"))
    assert (msg.role, msg.text()) == ("assistant", "hi")

    async def stream() -> Any:
        for c in _chunks():
            yield c

    out = [m async for m in conv.convert_streaming_response({}, "n", stream(), {"k": "v"})]
    assert [m.text() for m in out if isinstance(m, Message) and m.delta] == ["Hel", "lo"]
    final = out[-1]
    assert isinstance(final, Message) and final.text() == "Hello"
    assert [c.name for c in final.tool_calls()] == ["f"]
    assert final.metadata["k"] == "v"
    with pytest.raises(ValidationError):
        await conv.convert_response("not a completion")


@pytest.mark.anyio
async def test_model_response_converter_resolves_callables_by_name() -> None:
    async def produce() -> dict[str, Any]:
        return _completion("from a coroutine")

    msg = await ModelResponseConverter(produce, "openai").invoke()
    assert msg.text() == "from a coroutine"
    streamed = [m async for m in ModelResponseConverter(_chunks, "openai").stream({"x": 1}, "n")]
    assert isinstance(streamed[-1], Message) and streamed[-1].text() == "Hello"
    with pytest.raises(ValidationError, match="Unsupported converter: nope"):
        ModelResponseConverter("r", "nope")
    with pytest.raises(ValidationError, match="Config must be provided"):
        [m async for m in ModelResponseConverter("r", OpenAIConverter()).stream({}, "n")]
