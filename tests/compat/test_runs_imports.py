"""Each documented import line of the runs / streaming / interrupts / Command surface, run in a
fresh interpreter as a user's script would (an in-process import proves nothing: another test
may have imported the module first)."""

from __future__ import annotations

import subprocess
import sys

import pytest

LINES = [
    # concepts/streaming.md, concepts/state-graph.md
    (
        "from tenxgraph.core.state.stream_chunks import StreamChunk, StreamEvent",
        "assert StreamChunk(event=StreamEvent.STATE).model_dump()['event'] == 'state'",
    ),
    (
        "from tenxgraph.core.state.stream_chunks import StreamEvent",
        "assert StreamEvent.UPDATES == 'updates'",
    ),
    # how-to/python/stream-graph.md
    (
        "from tenxgraph.core.state import StreamChunk, StreamEvent",
        "assert 'metadata' in StreamChunk.model_fields",
    ),
    (
        "from tenxgraph.core.state import Message, StreamEvent",
        "assert StreamEvent.MESSAGE == 'message'",
    ),
    (
        "from tenxgraph.core.state import AgentState, Message, StreamEvent",
        "assert AgentState().context == []",
    ),
    # the old home of the chunk classes keeps working, with the same objects
    (
        "from tenxgraph.core.graph import StreamChunk, StreamEvent",
        "import tenxgraph.core.state.stream_chunks as m; assert m.StreamChunk is StreamChunk",
    ),
    # reference/python/command-handoff.md, concepts/callbacks-and-command.md
    ("from tenxgraph.utils import Command", "assert Command.PARENT == 'PARENT'"),
    ("from tenxgraph.utils import Command, END", "assert Command(goto=END).goto == END"),
    # interrupts
    (
        "from tenxgraph.utils import GraphInterrupt, Interrupt",
        "assert issubclass(GraphInterrupt, BaseException) and Interrupt(id='x').value is None",
    ),
    (
        "from tenxgraph.utils import interrupt, pending_interrupt, pending_interrupts",
        "assert pending_interrupt({}) is None and pending_interrupts({}) == []",
    ),
    (
        "from tenxgraph.core.exceptions import InterruptPendingError",
        "assert issubclass(InterruptPendingError, ValueError)",
    ),
    ("from tenxgraph.utils import ResponseGranularity", "assert ResponseGranularity.FULL"),
]


@pytest.mark.parametrize(("line", "check"), LINES, ids=[line for line, _ in LINES])
def test_documented_import_line_in_a_fresh_interpreter(line: str, check: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", f"{line}\n{check}\n"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
