"""The tutorial programs of examples/tutorials run against the scripted server
(OPENAI_BASE_URL pointing at it) and print what their tutorial promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._fake_llm_server import ScriptedLLMServer, plausible_reply

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "examples" / "tutorials"


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(responder=plausible_reply, strict=True) as s:
        yield s


def run(name: str, server: ScriptedLLMServer, tmp_path: Path) -> str:
    env = dict(os.environ)
    env.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key", MODEL="gpt-4o-mini")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(
        [sys.executable, "-W", "default", str(TUTORIALS / name)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    for noise in ("Warning", "Traceback", "Task was destroyed"):
        assert noise not in proc.stderr, proc.stderr[-3000:]
    return proc.stdout


def test_react_agent(server: ScriptedLLMServer, tmp_path: Path) -> None:
    out = run("react_agent.py", server, tmp_path)
    assert "get_weather({'location': 'Lisbon'})" in out
    assert "tool      It is 21 degrees and sunny in Lisbon." in out
    assert "thread holds 4 messages" in out


def test_react_streaming(server: ScriptedLLMServer, tmp_path: Path) -> None:
    out = run("react_streaming.py", server, tmp_path)
    assert "[tool] Light rain and 14 degrees in Lisbon." in out
    assert "Here is what I found: Light rain" in out
    assert "stored: ['user', 'assistant', 'tool', 'assistant']" in out
    deltas = int(out.split(" deltas streamed")[0].split()[-1])
    assert deltas > 5


def test_stop_stream(server: ScriptedLLMServer, tmp_path: Path) -> None:
    out = run("stop_stream.py", server, tmp_path)
    assert "stop requested:" in out and "status: stopped" in out
    received = int(out.split("received ")[1].split()[0])
    assert 0 < received < 200


def test_stream_sync(server: ScriptedLLMServer, tmp_path: Path) -> None:
    before = len(server.requests)
    out = run("stream_sync.py", server, tmp_path)
    assert "node finished: MAIN" in out and "node finished: TOOL" in out
    assert "answer: Here is what I found: Clear skies over Lisbon." in out
    assert "traveller stored: Mika" in out
    first = server.requests[before]["body"]
    assert first["stream"] is True
    assert first["messages"][0]["content"] == "You are helping Mika plan a trip."


def test_custom_state(server: ScriptedLLMServer, tmp_path: Path) -> None:
    out = run("custom_state.py", server, tmp_path)
    assert "candidate=Rosa role=data engineer score=0.82" in out
    prompts = [json.dumps(r["body"]["messages"][0]) for r in server.requests]
    assert any("You screen Rosa for the data engineer role." in p for p in prompts)


def test_tool_decorator(server: ScriptedLLMServer, tmp_path: Path) -> None:
    before = len(server.requests)
    out = run("tool_decorator.py", server, tmp_path)
    assert "decorated: True False" in out
    assert "tags of cancel_order: ['orders', 'write']" in out
    assert "order tools: ['lookup_order', 'cancel_order']" in out
    assert "read tools: ['lookup_order']" in out
    offered = [t["function"]["name"] for t in server.requests[before]["body"]["tools"]]
    assert offered == ["lookup_order"]
    assert "shipped" in out


def test_handoff(server: ScriptedLLMServer, tmp_path: Path) -> None:
    out = run("handoff.py", server, tmp_path)
    lines = [line.split(None, 1) for line in out.strip().splitlines()]
    assert lines[1] == ["assistant", "transfer_to_RESEARCHER"]
    assert lines[2] == ["tool", "Handed off to RESEARCHER."]
    assert lines[3] == ["assistant", "search_notes"]
    assert lines[-1][1].startswith("Here is what I found: Notes on Lisbon")


def test_multi_agent(server: ScriptedLLMServer, tmp_path: Path) -> None:
    out = run("multi_agent.py", server, tmp_path)
    assert "'Please polish my CV.' -> CV drafted." in out
    assert "'Write a JD for a welder.' -> Job description drafted." in out
    assert "'What time is it?' -> OTHER" in out


def test_react_validation(server: ScriptedLLMServer, tmp_path: Path) -> None:
    before = len(server.requests)
    out = run("react_validation.py", server, tmp_path)
    assert "answered: Here is what I found: Warm and dry in Lisbon." in out
    assert "blocked (banned_topic): we do not give stock tips" in out
    assert "blocked (injection_pattern):" in out
    assert "blocked (all_caps): please do not shout" in out
    assert "stored for a blocked thread: None" in out
    assert len(server.requests) - before == 2  # only the valid question reached the model
