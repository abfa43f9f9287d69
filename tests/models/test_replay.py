"""The trajectory loader, the replay model (a pure function of recording + conversation) and the
replay tools, on the bundled trajectories and the embedded stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.models.base import ModelError
from tenxgraph.models.replay import (
    ReplayModel,
    ReplayTools,
    bundled_data_path,
    compare_messages,
    load_trajectories,
    read_effects,
)
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def trajectories():
    return load_trajectories()


@pytest.fixture(scope="module")
def restored():
    return load_trajectories(restore_original_ids=True)


def _by_id(trajs, tid):
    return next(t for t in trajs if t.id == tid)


def _graph(traj, checkpointer, effects=None):
    model = ReplayModel(traj)
    tools = ReplayTools(traj, effects, check_ledger=True)
    g = StateGraph()
    g.add_node("MAIN", Agent(model=model, tool_node="TOOL"))
    g.add_node("TOOL", ToolNode(tools.functions))
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_conditional_edges(
        "TOOL", lambda s: "MAIN" if model.has_answer(s.context) else END, {"MAIN": "MAIN", END: END}
    )
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=checkpointer), model, tools


async def _replay(app, traj, thread_id, user="u1"):
    for turn in traj.turns:
        cfg = {"thread_id": thread_id, "user_id": user, "recursion_limit": 500}
        inputs = [traj.messages[i] for i in turn.inputs]
        if turn.closing:
            await app.aupdate_state(cfg, {"messages": inputs})
        else:
            await app.ainvoke({"messages": inputs}, cfg)
    return await app.aget_state({"thread_id": thread_id, "user_id": user})


# -- loader ---------------------------------------------------------------------------------------
def test_bundled_data_loads_with_the_documented_counts(trajectories):
    assert bundled_data_path().joinpath("LICENSE-DATA.md").is_file()
    assert len(trajectories) == 122
    assert sum(len(t.messages) for t in trajectories) == 3332
    assert sum(t.tool_call_count for t in trajectories) == 1002
    assert len({t.id for t in trajectories}) == 122
    t0 = trajectories[0]
    assert all(m.message_id == t0.message_id(i) for i, m in enumerate(t0.messages))


def test_openings_are_seeded_and_endings_close(trajectories):
    for traj in trajectories:
        first = traj.turns[0]
        assert traj.messages[first.inputs[-1]].role == "user"
        assert [traj.messages[i].role for i in first.inputs[:-1]] in (["system"], ["assistant"])
        last = traj.turns[-1]
        end_role = traj.messages[-1].role
        if end_role == "user":
            assert last.closing
            assert (
                "###STOP###" in traj.messages[-1].text()
                or "###TRANSFER###" in traj.messages[-1].text()
            )
        else:
            assert end_role == "tool" and not last.closing


def test_single_file_limit_and_bad_lines(tmp_path):
    one = load_trajectories(bundled_data_path() / "tau2_toolorchestra.jsonl", limit=3)
    assert len(one) == 3 and all(t.source.startswith("tau2") for t in one)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "messages": [{"role": "robot", "content": ""}]}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        load_trajectories(bad)
    with pytest.raises(FileNotFoundError):
        load_trajectories(tmp_path / "missing")


def test_restore_original_ids_maps_dup2_back(trajectories, restored):
    traj = next(t for t in trajectories if t.meta.get("renamed_tool_call_ids"))
    back = _by_id(restored, traj.id)
    renamed = traj.meta["renamed_tool_call_ids"]
    ids = [c.id for m in back.messages for c in m.tool_calls()]
    assert not any(i in renamed for i in ids)
    assert len(ids) != len(set(ids))  # a reused id, as the source had it
    assert back.restored_ids and not traj.restored_ids


# -- model ----------------------------------------------------------------------------------------
async def test_replay_model_is_pure(trajectories):
    traj = _by_id(trajectories, "tau2-airline-toolorchestra-task22-trial0")
    model, other = ReplayModel(traj), ReplayModel(traj)
    convo = list(traj.messages[: traj.turns[1].start])
    a = await model.agenerate(convo)
    b = await model.agenerate(list(convo))
    c = await other.agenerate(convo, tools=[{"type": "function"}], temperature=0.7)
    assert a == b == c
    assert a.message_id == traj.message_id(len(convo))
    # an agent's own system prompt in front is allowed
    sys_prompt = [traj.messages[0].model_copy(update={"role": "system", "message_id": "p"})]
    assert (await model.agenerate(sys_prompt + convo)).message_id == a.message_id


async def test_replay_model_resumes_mid_conversation_and_refuses_divergence(trajectories):
    traj = _by_id(trajectories, "tau2-airline-toolorchestra-task22-trial0")
    model = ReplayModel(traj)
    for pos, msg in enumerate(traj.messages):
        if msg.role != "assistant" or pos == 0:
            continue
        got = await model.agenerate(list(traj.messages[:pos]))
        assert compare_messages(traj, list(traj.messages[:pos]) + [got]) == [
            f"the thread holds {pos + 1} messages, the recording {len(traj.messages)}"
        ]
    wrong = list(traj.messages[:2]) + [
        traj.messages[1].model_copy(update={"content": "something else"})
    ]
    with pytest.raises(ModelError) as err:
        await model.agenerate(wrong)
    assert err.value.error_code == ModelError.default_code and err.value.context["position"] == 2
    with pytest.raises(ModelError):  # the end of the recording has no answer
        await model.agenerate(list(traj.messages))
    assert not model.has_answer(list(traj.messages))


async def test_parallel_calls_replay_on_sqlite(tmp_path, trajectories):
    traj = _by_id(trajectories, "tau2-airline-toolorchestra-task22-trial0")
    assert max(len(m.tool_calls()) for m in traj.messages) >= 5
    cp = SqliteCheckpointer(str(tmp_path / "r.sqlite"))
    effects = tmp_path / "effects.jsonl"
    app, _, tools = _graph(traj, cp, effects)
    state = await _replay(app, traj, "t-long")
    assert compare_messages(traj, list(state.context)) == []
    assert (
        await cp.aledger_count({"thread_id": "t-long", "user_id": "u1"})
        == traj.tool_call_count
        == 93
    )
    runs = read_effects(effects)
    assert len(runs) == 93 and not any(r.ledger_had_it for r in runs)
    assert all(n == 1 for n in tools.executions.values())
    await cp.aclose()


async def test_reused_ids_restored_executes_both_calls(restored):
    traj = next(
        t
        for t in restored
        if t.restored_ids and t.messages[-1].role == "user" and len(t.messages) < 40
    )
    cp = InMemoryCheckpointer()
    app, _, tools = _graph(traj, cp)
    state = await _replay(app, traj, "t-reused")
    assert compare_messages(traj, list(state.context)) == []
    ids = [c.id for m in traj.messages for c in m.tool_calls()]
    reused = {i for i in ids if ids.count(i) > 1}
    assert reused
    # every call ran, the reused id once per call (two different assistant messages)
    assert sum(tools.executions.values()) == len(ids)
    for cid in reused:
        assert sum(n for (_, c), n in tools.executions.items() if c == cid) == ids.count(cid)
    assert await cp.aledger_count({"thread_id": "t-reused", "user_id": "u1"}) == len(ids)


class _Crash(BaseException):
    """Stands for the process dying: not an Exception, so nothing handles it."""


async def test_another_worker_resumes_a_cut_off_turn(trajectories):
    """A worker dies while a tool runs (after the model's answer was checkpointed); a fresh
    model and fresh tools (another worker) resume with invoke(None, config) and the thread ends
    exactly as recorded, each call executed once."""
    traj = _by_id(trajectories, "tau2-airline-toolorchestra-task11-trial0")
    turn = traj.turns[1]
    assert len(traj.messages[turn.start].tool_calls()) == 1
    cp = InMemoryCheckpointer()
    cfg = {"thread_id": "t-res", "user_id": "u1", "recursion_limit": 500}
    app1, _, tools1 = _graph(traj, cp)
    await app1.ainvoke({"messages": [traj.messages[i] for i in traj.turns[0].inputs]}, dict(cfg))

    async def dying(**kwargs):
        raise _Crash()

    tool_node = app1.node_objects["TOOL"].func
    for spec in tool_node._tools.values():
        object.__setattr__(spec, "func", dying)
    with pytest.raises(_Crash):
        await app1.ainvoke({"messages": [traj.messages[turn.inputs[0]]]}, dict(cfg))
    stored = await app1.aget_state(dict(cfg))
    assert (
        stored.execution_meta.status == "running" and stored.execution_meta.current_node == "TOOL"
    )
    assert traj.position(stored.context) == turn.start + 1  # the model's answer is durable

    app2, model2, tools2 = _graph(traj, cp)  # another worker
    await app2.ainvoke(None, dict(cfg))
    state = await app2.aget_state(dict(cfg))
    assert traj.position(state.context) == turn.end
    assert state.execution_meta.status == "completed"
    assert sum(tools2.executions.values()) == sum(
        len(m.tool_calls()) for m in traj.messages[turn.start : turn.end] if m.role == "assistant"
    )
    assert tools1.executions == {}


def test_effects_file_tolerates_a_torn_line(tmp_path):
    f = tmp_path / "e.jsonl"
    f.write_text(
        json.dumps({"t": "a", "r": "b", "p": 1, "c": "x", "n": "tool", "pid": 1, "l": False})
        + '\n{"t": "a", "r'
    )
    assert len(read_effects(f)) == 1
    assert read_effects(Path(tmp_path / "none.jsonl")) == []
