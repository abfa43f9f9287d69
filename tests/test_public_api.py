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
            {"BaseCheckpointer", "InMemoryCheckpointer", "Loaded", "PgCheckpointer", "SqliteCheckpointer", "StateSnapshot"},
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


def test_tool_decorator_imports_in_a_fresh_interpreter() -> None:
    # The lazy attribute once recursed because a submodule was also named ``tool``: only a
    # fresh interpreter (nothing imported before) shows it.
    import subprocess
    import sys

    code = (
        "from tenxgraph.utils import tool, get_tool_metadata, has_tool_decorator\n"
        "@tool(name='adder')\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "assert add(1, 2) == 3 and has_tool_decorator(add)\n"
        "assert get_tool_metadata(add)['name'] == 'adder'\n"
        "import tenxgraph.utils.decorators as d\n"
        "assert d.tool is tool\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
