"""JSON schemas of tools from type hints and docstrings (exact dicts), and argument validation."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, Optional

import pydantic
import pytest
from pydantic import BaseModel

from tenxgraph.core.graph._schema import (
    build_tool_spec,
    format_validation_error,
    parse_docstring,
    type_schema,
)
from tenxgraph.core.state import AgentState
from tenxgraph.utils.decorators import get_tool_metadata, has_tool_decorator, tool


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    city: str
    zip_code: str | None = None


class Person(BaseModel):
    name: str
    address: Address


# -- type_schema ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Any, {}),
        (Color, {"type": "string", "enum": ["red", "blue"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, "x"], {"enum": [1, "x"]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list, {"type": "array"}),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (dict, {"type": "object"}),
        (dict[str, Any], {"type": "object"}),
        (str | None, {"type": ["string", "null"]}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - the typing spelling
        (
            list[str] | None,
            {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        ),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Annotated[str, "the city"], {"type": "string", "description": "the city"}),
        (
            Annotated[int, pydantic.Field(description="how many")],
            {"type": "integer", "description": "how many"},
        ),
        (list[Color], {"type": "array", "items": {"type": "string", "enum": ["red", "blue"]}}),
    ],
)
def test_type_schema(hint: Any, expected: dict[str, Any]) -> None:
    assert type_schema(hint) == expected


def test_pydantic_model_schema_hoists_defs() -> None:
    defs: dict[str, Any] = {}
    schema = type_schema(Person, defs)
    assert schema == {
        "properties": {
            "name": {"title": "Name", "type": "string"},
            "address": {"$ref": "#/$defs/Address"},
        },
        "required": ["name", "address"],
        "title": "Person",
        "type": "object",
    }
    assert defs == {"Address": Address.model_json_schema()}


# -- docstrings ---------------------------------------------------------------------------------------
def test_google_docstring() -> None:
    doc = """Get the weather
    for a city.

    Uses a public API.

    Args:
        city (str): The city's name,
            in English.
        days: How many days.

    Returns:
        A report.
    """
    desc, args = parse_docstring(doc)
    assert desc == "Get the weather for a city.\n\nUses a public API."
    assert args == {"city": "The city's name, in English.", "days": "How many days."}


def test_numpy_docstring() -> None:
    doc = """Add numbers.

    Parameters
    ----------
    a : int
        First number.
    b, c : int
        Others.

    Returns
    -------
    int
    """
    assert parse_docstring(doc) == (
        "Add numbers.",
        {"a": "First number.", "b": "Others.", "c": "Others."},
    )


def test_sphinx_docstring() -> None:
    doc = """Do it.

    :param x: the x
    :param int y: the y
    :returns: nothing
    """
    assert parse_docstring(doc) == ("Do it.", {"x": "the x", "y": "the y"})


def test_empty_docstring() -> None:
    assert parse_docstring(None) == ("", {})


# -- whole tool specs -----------------------------------------------------------------------------------
def get_weather(location: str, days: int = 1, unit: Literal["c", "f"] = "c") -> str:
    """Get the current weather for a specific location.

    Args:
        location: City name.
        days: Forecast length in days.
    """
    return location


def test_plain_function_spec_exact() -> None:
    spec = build_tool_spec(get_weather)
    assert spec.openai_schema() == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a specific location.",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "City name."},
                    "days": {
                        "type": "integer",
                        "description": "Forecast length in days.",
                        "default": 1,
                    },
                    "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
                },
                "required": ["location"],
            },
        },
    }
    assert spec.is_async is False
    assert spec.injected == frozenset()


def test_injected_params_hidden() -> None:
    async def lookup(
        query: str,
        tool_call_id: str | None = None,
        state: AgentState | None = None,
        config: dict | None = None,
    ) -> str:
        """Look something up."""
        return query

    spec = build_tool_spec(lookup)
    params = spec.parameters
    assert params == {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    }
    assert spec.injected == frozenset({"tool_call_id", "state", "config"})
    assert spec.is_async is True


def test_pydantic_and_optional_params() -> None:
    def register(person: Person, tags: list[str] | None = None, color: Color = Color.RED) -> None:
        """Register a person."""

    spec = build_tool_spec(register)
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "person": {
                "properties": {
                    "name": {"title": "Name", "type": "string"},
                    "address": {"$ref": "#/$defs/Address"},
                },
                "required": ["name", "address"],
                "title": "Person",
                "type": "object",
            },
            "tags": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
            },
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
        },
        "required": ["person"],
        "$defs": {"Address": Address.model_json_schema()},
    }
    kwargs = spec.validate_args(
        {"person": {"name": "Ann", "address": {"city": "Oslo"}}, "color": "blue"}
    )
    assert kwargs == {
        "person": Person(name="Ann", address=Address(city="Oslo")),
        "color": Color.BLUE,
    }


def test_no_hints_and_varargs() -> None:
    def anything(a, *args, b=3, **kwargs):  # noqa: ANN001, ANN002, ANN003
        return a

    spec = build_tool_spec(anything)
    assert spec.parameters == {
        "type": "object",
        "properties": {"a": {}, "b": {"default": 3}},
        "required": ["a"],
    }
    # **kwargs: unknown arguments are passed through
    assert spec.validate_args({"a": 1, "zzz": 2}) == {"a": 1, "zzz": 2}


def test_decorator_bare_and_with_arguments() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers together."""
        return a + b

    @tool(name="web_search", description="Search the web", tags=["web"], provider="internal")
    async def search(query: str) -> dict:
        """Ignored docstring."""
        return {}

    assert add(2, 3) == 5  # still a plain function
    assert has_tool_decorator(add) and has_tool_decorator(search)
    assert not has_tool_decorator(get_weather)
    assert get_tool_metadata(search)["tags"] == {"web"}
    assert get_tool_metadata(search)["provider"] == "internal"
    assert build_tool_spec(add).openai_schema()["function"] == {
        "name": "add",
        "description": "Add two numbers together.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    }
    spec = build_tool_spec(search)
    assert (spec.name, spec.description, spec.tags) == (
        "web_search",
        "Search the web",
        frozenset({"web"}),
    )


def test_explicit_schema() -> None:
    params = {
        "type": "object",
        "properties": {"q": {"type": "string", "minLength": 1}},
        "required": ["q"],
    }

    @tool(schema=params)
    def find(q: str) -> str:
        """Find."""
        return q

    assert build_tool_spec(find).parameters == params

    @tool(
        schema={
            "type": "function",
            "function": {"name": "seek", "description": "Seek it.", "parameters": params},
        }
    )
    def find2(q: str) -> str:
        return q

    spec = build_tool_spec(find2)
    assert (spec.name, spec.description, spec.parameters) == ("find2", "Seek it.", params)


def test_decorating_a_bound_method() -> None:
    class Calc:
        def mul(self, a: int, b: int) -> int:
            """Multiply."""
            return a * b

    wrapped = tool(name="mul")(Calc().mul)
    spec = build_tool_spec(wrapped)
    assert spec.name == "mul"
    assert spec.parameters["required"] == ["a", "b"]
    assert wrapped(a=2, b=4) == 8


def test_param_named_like_basemodel_attribute() -> None:
    def f(json: str, copy: int = 0) -> str:
        return json

    spec = build_tool_spec(f)
    assert spec.validate_args({"json": "x"}) == {"json": "x"}


# -- validation errors --------------------------------------------------------------------------------
def test_validation_error_message() -> None:
    spec = build_tool_spec(get_weather)
    with pytest.raises(pydantic.ValidationError) as info:
        spec.validate_args({"days": "many", "unit": "k", "extra": 1})
    text = format_validation_error("get_weather", info.value)
    assert text.startswith("invalid arguments for tool 'get_weather': ")
    assert "location: Field required" in text
    assert "days: Input should be a valid integer" in text and "(got 'many')" in text
    assert "unit: Input should be 'c' or 'f' (got 'k')" in text
    assert "extra: unexpected argument" in text


def test_lax_coercion() -> None:
    spec = build_tool_spec(get_weather)
    assert spec.validate_args({"location": "Oslo", "days": "3"}) == {"location": "Oslo", "days": 3}


def test_partial_and_callable_object() -> None:
    import functools

    def greet(name: str, greeting: str = "Hello") -> str:
        """Greet someone.

        Args:
            name: Who to greet.
        """
        return f"{greeting} {name}"

    spec = build_tool_spec(functools.partial(greet, greeting="Hi"))
    assert spec.name == "greet"
    assert spec.description == "Greet someone."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Who to greet."},
            "greeting": {"type": "string", "default": "Hi"},
        },
        "required": ["name"],
    }

    class Counter:
        """A counter."""

        async def __call__(self, step: int = 1) -> int:
            """Count up by step."""
            return step

    obj_spec = build_tool_spec(Counter())
    assert (obj_spec.name, obj_spec.description, obj_spec.is_async) == (
        "Counter",
        "Count up by step.",
        True,
    )
    assert obj_spec.parameters == {
        "type": "object",
        "properties": {"step": {"type": "integer", "default": 1}},
    }
