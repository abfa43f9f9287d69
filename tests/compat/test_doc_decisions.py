"""Decisions recorded in docs/compat-10xgraph.md where 10xGraph's pages disagree or name things
tenxgraph does not provide: the recorded behaviour is the real one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tenxgraph.core.state import Message, ToolResultBlock


def test_tool_result_block_follows_the_reference_and_refuses_the_concepts_names():
    block = ToolResultBlock(tool_call_id="call_1", content="Sunny", is_error=False)
    msg = Message(role="tool", content=[block], tool_call_id="call_1")
    assert msg.content[0].tool_call_id == "call_1" and msg.content[0].content == "Sunny"
    # concepts/state-and-messages spells it call_id / output / status: refused, not dropped
    with pytest.raises(ValueError, match="call_id"):
        ToolResultBlock(call_id="call_1", output="Sunny", status="completed")


def test_graceful_shutdown_manager_is_not_provided():
    # Fresh interpreter: the import a 10xGraph user would try fails loudly.
    proc = subprocess.run(
        [sys.executable, "-c", "from tenxgraph.utils import GracefulShutdownManager"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "ImportError" in proc.stderr
