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


def _gemini(*parts: Any, finish: str | None = "STOP") -> Any:
    from types import SimpleNamespace as NS

    content = NS(parts=list(parts))
    return NS(
        candidates=[NS(content=content, finish_reason=finish)],
        usage_metadata=NS(prompt_token_count=3, candidates_token_count=2, total_token_count=5),
        response_id="g1",
        model_version="gemini-x",
    )


@pytest.mark.anyio
async def test_google_converter_reads_gemini_responses() -> None:
    from types import SimpleNamespace as NS

    from tenxgraph.runtime.adapters.llm.google_genai_converter import GoogleGenAIConverter

    converter = ModelResponseConverter(
        _gemini(
            NS(text="thinking", thought=True, function_call=None),
            NS(text="hello", thought=False, function_call=None),
            NS(text=None, thought=False, function_call=NS(id="c1", name="f", args={"a": 1})),
        ),
        "google",
    )
    assert isinstance(converter.converter, GoogleGenAIConverter)
    msg = await converter.invoke()
    assert msg.text() == "hello" and msg.reasoning == "thinking"
    assert [(c.name, c.args) for c in msg.tool_calls()] == [("f", {"a": 1})]
    assert msg.metadata["model"] == "gemini-x" and msg.metadata["provider"] == "google"
    stream = [
        _gemini(NS(text="he", thought=False, function_call=None), finish=None),
        _gemini(NS(text="llo", thought=False, function_call=None)),
    ]
    out = [
        m
        async for m in GoogleGenAIConverter().convert_streaming_response(
            {"thread_id": "t"}, "MAIN", stream, meta={"k": "v"}
        )
    ]
    assert [m.delta for m in out] == [True, True, False]
    final = out[-1]
    assert isinstance(final, Message) and final.text() == "hello" and final.metadata["k"] == "v"
    with pytest.raises(ValidationError):
        await GoogleGenAIConverter().convert_response({"not": "a response"})
