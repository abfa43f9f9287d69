"""The public surface of DESIGN section 1 imports as 10xGraph's documentation writes it, and
each package's ``__all__`` lists exactly the names we mean to export (sorted, all present)."""

from __future__ import annotations

import importlib

import pytest


def test_documented_imports() -> None:
    from tenxgraph.core.exceptions import (  # noqa: F401
        GraphError,
        GraphRecursionError,
        NodeTimeoutError,
        SerializationError,
        StaleStateError,
        StorageError,
        TransientStorageError,
    )
    from tenxgraph.core.graph import Agent, StateGraph, ToolNode  # noqa: F401
    from tenxgraph.core.state import AgentState, Message  # noqa: F401
    from tenxgraph.core.state.reducers import (  # noqa: F401
        add_messages,
        append_items,
        replace_messages,
        replace_value,
    )
    from tenxgraph.storage.checkpointer import (  # noqa: F401
        InMemoryCheckpointer,
        PgCheckpointer,
        SqliteCheckpointer,
    )
    from tenxgraph.utils import END, START, Command, ResponseGranularity, tool  # noqa: F401

    assert (START, END) == ("__start__", "__end__")


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ("tenxgraph.core.graph", {"Agent", "CompiledGraph", "StateGraph", "StreamChunk", "StreamEvent", "ToolNode"}),
        (
            "tenxgraph.storage.checkpointer",
            {"ADMIN_SCOPE", "BaseCheckpointer", "InMemoryCheckpointer", "Loaded", "PgCheckpointer", "SqliteCheckpointer", "StateSnapshot"},
        ),
    ],
)
def test_all_is_what_we_export(module: str, expected: set[str]) -> None:
    mod = importlib.import_module(module)
    assert set(mod.__all__) == expected
    assert list(mod.__all__) == sorted(mod.__all__)
    for name in mod.__all__:
        assert getattr(mod, name) is not None


def test_every_error_code_is_registered() -> None:
    from tenxgraph.core import exceptions

    for name in exceptions.__all__:
        cls = getattr(exceptions, name)
        if isinstance(cls, type) and issubclass(cls, exceptions.TenxGraphError):
            assert cls.default_code in exceptions.ERROR_CODES, name
