"""Fixtures of the Agent tests: the scripted OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tenxgraph.core.llm import set_default_llm_timeout

from ._fake_llm_server import ScriptedLLMServer


@pytest.fixture
def llm() -> Iterator[ScriptedLLMServer]:
    """A scripted chat-completions server on 127.0.0.1 (a real HTTP server)."""
    server = ScriptedLLMServer()
    try:
        yield server
    finally:
        server.close()
        set_default_llm_timeout(None)
