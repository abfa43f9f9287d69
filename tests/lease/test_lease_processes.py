"""The run lease across OS processes on the durable stores (issue 15, docs/how-to/run-lease.md).

* N processes x M turns on one thread with each multitask strategy: the history is complete and
  gap-free, no run loses its compare-and-swap, and no node execution is thrown away (every
  execution logged in the side-effect file has its message in a kept version).
* SIGKILL of the lease holder mid-node: the next run waits for the lapse, then replays only
  that node.
* SIGSTOP of the holder past its lease, then SIGCONT: its stale fence cannot commit.
* Two processes racing to answer one ``interrupt()``: the node body runs once.

Children run ``_lease_child.py`` (see its docstring).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _lease_child import asking, read_effects
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    only,
    pytest_generate_tests,
    sync_backend_fixture,
)

import tenxgraph
from tenxgraph.core.state import Message

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
CHILD = HERE / "_lease_child.py"
REPO = Path(tenxgraph.__file__).resolve().parent.parent

#: Short lease timing so the tests wait for lapses briefly (seconds).
TIMING = {"lease_ttl_s": 1.0, "lease_renew_s": 0.3, "enqueue_timeout_s": 60.0}
#: Keep every version: a thrown-away execution is one whose message no version holds.
KEEP_ALL = {"state_history_limit": 0}


def spawn(*args: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]))
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[bytes], returncode: int = 0) -> dict[str, Any]:
    """Wait for ``proc``; check its exit status; its last stdout line as JSON."""
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == returncode, err.decode(errors="replace")[-3000:]
    if returncode != 0:
        return {}
    return json.loads(out.decode().strip().splitlines()[-1])


def wait_for(pred: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def kept_message_ids(backend: Backend, tid: str) -> tuple[list[int], set[str], list[str]]:
    """``(versions newest first, ids of every message in any kept version, ids of the current
    version in order)``."""
    cp = backend.new(**KEEP_ALL)
    history = cp.get_state_history({"thread_id": tid})
    ids = {m.message_id for snap in history for m in snap.state.context}
    current = [m.message_id for m in history[0].state.context] if history else []
    return [s.version for s in history], ids, current


# -- N processes x M turns ----------------------------------------------------------------------
@only("sqlite", "postgres", "postgres+redis")
@pytest.mark.parametrize("strategy", ["reject", "enqueue", "interrupt", "rollback"])
def test_n_processes_m_turns_throw_no_node_away(
    sync_backend: Backend, tmp_path: Path, strategy: str
) -> None:
    # interrupt / rollback need runs longer than the holder's 1 s stop poll to interrupt any.
    procs_n, turns, nodes, node_s = (
        (3, 3, 2, 0.05) if strategy in ("reject", "enqueue") else (2, 2, 3, 0.45)
    )
    spec = json.dumps(sync_backend.spec(**KEEP_ALL, **TIMING))
    effects = tmp_path / "effects.log"
    tid = f"shared-{strategy}"
    procs = [
        spawn(
            "turns", spec, tid, str(effects), f"w{i}", str(turns), str(nodes), str(node_s), strategy
        )
        for i in range(procs_n)
    ]
    outs = [finish(p) for p in procs]
    assert all(o["errors"] == [] for o in outs), outs
    assert sum(o["stale"] for o in outs) == 0, outs  # no run lost its compare-and-swap
    assert sum(o["ok"] for o in outs) == procs_n * turns
    if strategy != "reject":
        assert sum(o["busy"] for o in outs) == 0

    versions, kept, current = kept_message_ids(sync_backend, tid)
    assert versions == list(range(len(versions), 0, -1))  # complete, no gap
    executed = [eid for _, eid in read_effects(effects)]
    assert len(executed) == len(set(executed))
    thrown_away = [eid for eid in executed if eid not in kept]
    assert thrown_away == []
    users = [i for i in current if i.startswith("u-")]
    if strategy == "rollback":
        # a rolled-back run's checkpoints left the current state but stay in history
        assert {f"u-w{i}-{t}" for i in range(procs_n) for t in range(turns)} <= kept
    else:
        # every turn's input is in the conversation once, and each run's nodes ran once per
        # turn, except runs stopped by an interrupt (fewer nodes, never more)
        assert sorted(users) == sorted(f"u-w{i}-{t}" for i in range(procs_n) for t in range(turns))
        assert len(executed) <= nodes * procs_n * turns
        if strategy != "interrupt":
            assert len(executed) == nodes * procs_n * turns


@only("postgres-pgbouncer", "postgres-partitioned")
def test_enqueue_on_the_production_topologies(sync_backend: Backend, tmp_path: Path) -> None:
    spec = json.dumps(sync_backend.spec(**KEEP_ALL, **TIMING))
    effects = tmp_path / "effects.log"
    procs = [
        spawn("turns", spec, "shared", str(effects), f"w{i}", "3", "2", "0.02", "enqueue")
        for i in range(3)
    ]
    outs = [finish(p) for p in procs]
    assert [(o["ok"], o["stale"], o["busy"], o["errors"]) for o in outs] == [(3, 0, 0, [])] * 3
    versions, kept, _ = kept_message_ids(sync_backend, "shared")
    assert versions == list(range(18, 0, -1))
    assert all(eid in kept for _, eid in read_effects(effects))


# -- crash of the holder -----------------------------------------------------------------------
@only("sqlite", "postgres")
@pytest.mark.parametrize("next_strategy", ["none", "reject", "enqueue"])
def test_sigkill_of_the_holder_the_next_run_waits_for_the_lapse_and_replays_one_node(
    sync_backend: Backend, tmp_path: Path, next_strategy: str
) -> None:
    spec = json.dumps(sync_backend.spec(**KEEP_ALL, **TIMING))
    effects, block = tmp_path / "effects.log", tmp_path / "block"
    block.touch()
    holder = spawn("hold", spec, "t", str(effects), str(block), "enqueue")
    wait_for(lambda: any(n == "slow-start" for n, _ in read_effects(effects)))
    holder.send_signal(signal.SIGKILL)
    finish(holder, -signal.SIGKILL)
    killed_at = time.monotonic()
    block.unlink()

    if next_strategy == "reject":
        # a new run refused while the dead holder's lease has not lapsed, before any node
        out = finish(spawn("resume", spec, "t", str(effects), "reject"))
        if "error" in out:
            assert out["error"] == "STORAGE_BUSY_001"
            assert 0 < out["context"]["lease_expires_in_s"] <= TIMING["lease_ttl_s"]
            time.sleep(out["context"]["lease_expires_in_s"])
    out = finish(spawn("resume", spec, "t", str(effects), next_strategy))
    assert out.get("ok") is True, out
    # it could only proceed once the lease lapsed (1 s after the holder's last renewal)
    assert time.monotonic() - killed_at >= TIMING["lease_ttl_s"] - TIMING["lease_renew_s"]
    nodes = [n for n, _ in read_effects(effects)]
    assert nodes.count("first") == 1  # not replayed
    assert nodes.count("slow-start") == 2  # the killed execution and its one replay
    assert nodes.count("slow") == 1
    versions, kept, current = kept_message_ids(sync_backend, "t")
    assert versions == list(range(len(versions), 0, -1))
    assert [i.split("-")[0] for i in current] == ["u", "first", "slow"]


@only("sqlite", "postgres")
def test_a_holder_stopped_past_its_lease_cannot_commit_with_its_stale_fence(
    sync_backend: Backend, tmp_path: Path
) -> None:
    spec = json.dumps(sync_backend.spec(**KEEP_ALL, **TIMING))
    effects, block_a, block_b = tmp_path / "effects.log", tmp_path / "a", tmp_path / "b"
    block_a.touch()
    a = spawn("hold", spec, "t", str(effects), str(block_a), "enqueue")
    wait_for(lambda: any(n == "slow-start" for n, _ in read_effects(effects)))
    a.send_signal(signal.SIGSTOP)
    try:
        block_a.unlink()  # A would finish its node at once, if it could run
        time.sleep(TIMING["lease_ttl_s"] * 1.5)  # its lease lapses: it cannot renew
        block_b.touch()
        b = spawn("hold", spec, "t", str(effects), str(block_b), "enqueue")
        # B took the lease over; it runs "first" and blocks in "slow"
        wait_for(lambda: sum(n == "slow-start" for n, _ in read_effects(effects)) == 2)
    finally:
        a.send_signal(signal.SIGCONT)
    out_a = finish(a)
    # A's node finished, and its checkpoint was refused by the fence
    assert out_a["error"] == "STORAGE_CONFLICT_000", out_a
    assert "fence" in out_a["context"]
    block_b.unlink()
    out_b = finish(b)
    assert out_b.get("ok") is True, out_b
    versions, kept, current = kept_message_ids(sync_backend, "t")
    assert versions == list(range(len(versions), 0, -1))
    slow_ids = [eid for n, eid in read_effects(effects) if n == "slow"]
    assert len(slow_ids) == 2  # A's execution (thrown away: its lease was gone) and B's
    assert sum(1 for eid in slow_ids if eid in kept) == 1
    # B sent the same input message: it finished A's cut-off run (A's checkpoint of "first"
    # was committed before the stop), replaying "slow" only
    assert [i.split("-")[0] for i in current] == ["u", "first", "slow"]
    assert [n for n, _ in read_effects(effects)].count("first") == 1


@only("sqlite", "postgres")
def test_a_holder_paused_past_its_lease_makes_no_tool_call_after_it(
    sync_backend: Backend, tmp_path: Path
) -> None:
    """Issue 29: a holder stopped (SIGSTOP) longer than its lease between the ledger miss and
    its tool call, while another run takes the thread over and makes the call: once woken, it
    makes no call (20 of 20 tries, on several threads at once) and fails with the fence."""
    spec = json.dumps(sync_backend.spec(**KEEP_ALL, **TIMING))
    tries = 20 if sync_backend.kind == "postgres" else 4
    effects = [tmp_path / f"effects-{i}.log" for i in range(tries)]
    gates = [tmp_path / f"gate-{i}" for i in range(tries)]
    for g in gates:
        g.touch()
    holders = [
        spawn("pay", spec, f"t{i}", str(effects[i]), str(gates[i]), "enqueue") for i in range(tries)
    ]
    for i in range(tries):
        wait_for(lambda i=i: any(n == "gate" for n, *_ in read_effects(effects[i])), 60)
    for h in holders:
        h.send_signal(signal.SIGSTOP)
    try:
        for g in gates:
            g.unlink()  # each holder would make its call at once, if it could run
        time.sleep(TIMING["lease_ttl_s"] * 1.5)  # their leases lapse: they cannot renew
        takers = [
            spawn("pay", spec, f"t{i}", str(effects[i]), str(tmp_path / "no-gate"), "enqueue")
            for i in range(tries)
        ]
        outs = [finish(t) for t in takers]
    finally:
        for h in holders:
            h.send_signal(signal.SIGCONT)
    assert all(o.get("ok") is True for o in outs), outs
    for i, h in enumerate(holders):
        out = finish(h)
        assert out["error"] == "STORAGE_CONFLICT_000", out
        assert isinstance(out["context"].get("fence"), int), out
        lines = read_effects(effects[i])
        pays = [line for line in lines if line[0] == "pay"]
        # exactly one call was made, by the run that took the thread over, with its fence
        assert [p[1] for p in pays] == [str(takers[i].pid)], lines
        assert int(pays[0][2]) > out["context"]["fence"]
        cp = sync_backend.new(**KEEP_ALL)
        state = cp.get_state({"thread_id": f"t{i}"})
        assert [m.role for m in state.context] == ["user", "assistant", "tool"]
        assert state.context[2].text() == "paid 5"


# -- racing resumers ----------------------------------------------------------------------------
@only("sqlite", "postgres", "postgres+redis")
def test_two_racing_resumers_of_one_interrupt_run_the_node_once(
    sync_backend: Backend, tmp_path: Path
) -> None:
    effects, go = tmp_path / "effects.log", tmp_path / "go"
    cp = sync_backend.new(**TIMING)
    app = asking(cp, effects)
    res = app.invoke({"messages": [Message.text_message("hi")]}, {"thread_id": "t"})
    assert res["interrupted"] is True
    spec = json.dumps(sync_backend.spec(**TIMING))
    resumers = [spawn("answer", spec, "t", str(effects), str(go)) for _ in range(2)]
    time.sleep(1.0)  # both children are up and polling for the go file
    go.touch()
    outs = [finish(p) for p in resumers]
    assert all(o.get("ok") for o in outs), outs
    bodies = [n for n, _ in read_effects(effects)]
    assert bodies.count("ask-body") == 2  # the first pause, then one resume
    assert bodies.count("ask") == 1
    state = sync_backend.peer(cp).get_state({"thread_id": "t"})
    assert [m.text() for m in state.context] == ["hi", "ask:yes"]
