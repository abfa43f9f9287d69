"""Import lines that 10xGraph's released tests use, each as a first import in a fresh
interpreter (an import cycle only shows when a module is the first one loaded)."""

from __future__ import annotations

import subprocess
import sys

import pytest

LINES = [
    "from tenxgraph.core import StateGraph, Agent, ToolNode, CompiledGraph, AgentState, Message",
    "from tenxgraph.utils import CallbackManager, convert_messages, tool",
    "from tenxgraph.utils.converter import convert_messages",
    "from tenxgraph.core.authz import build_authz, get_authz, has_scope, isolation_scope",
    "from tenxgraph.runtime.publisher import ConsolePublisher",
    "from tenxgraph.runtime.publisher.console_publisher import ConsolePublisher",
    "from tenxgraph.runtime.adapters.llm.base_converter import BaseConverter, ConverterType",
    "from tenxgraph.runtime.adapters.llm.model_response_converter import ModelResponseConverter",
    "from tenxgraph.runtime.adapters.llm.openai_converter import OpenAIConverter",
]


def test_each_line_works_as_the_first_import() -> None:
    code = "import subprocess, sys\nfor line in sys.argv[1:]:\n"
    code += "    subprocess.run([sys.executable, '-c', line], check=True)\n"
    proc = subprocess.run(
        [sys.executable, "-c", code, *LINES], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", ["AgentState", "Message"])
def test_core_names_are_the_state_classes(name: str) -> None:
    import tenxgraph.core
    import tenxgraph.core.state

    assert getattr(tenxgraph.core, name) is getattr(tenxgraph.core.state, name)
