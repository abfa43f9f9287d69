"""Exactly-once turns on Postgres: a connection cut around a checkpoint's commit, by a TCP relay
on 127.0.0.1, never turns a committed turn into a conflict or into a second answer.

The turn either succeeds (the store read its own commit back by the write's token) or raises
``CommitOutcomeUnknownError``; re-sending the same message then yields exactly one answer in the
thread, and the graph's node ran once per message.
"""

from __future__ import annotations

from typing import Any

import pytest
from _pg_relay import PgRelay

from tenxgraph.core.exceptions import CommitOutcomeUnknownError, TransientStorageError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

pytest.importorskip("psycopg_pool")
from tenxgraph.storage.checkpointer import PgCheckpointer  # noqa: E402


def _app(cp: Any, runs: list[str]) -> Any:
    async def answer(state: AgentState) -> Message:
        last = state.context[-1].text()
        runs.append(last)
        return Message.text_message(f"echo {last}", role="assistant")

    g = StateGraph()
    g.add_node("answer", answer)
    g.set_entry_point("answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=cp)


def _answers(state: AgentState, text: str) -> int:
    return sum(1 for m in state.context if m.role == "assistant" and m.text() == f"echo {text}")


@pytest.fixture
async def relay() -> Any:
    r = await PgRelay().start()
    try:
        yield r
    finally:
        await r.close()


def _checkpointer(relay: PgRelay, pg_dsn: str, pg_schema: str) -> PgCheckpointer:
    return PgCheckpointer(
        relay.dsn(pg_dsn),
        schema=pg_schema,
        pool_config={"prepare_threshold": None, "timeout": 1.0, "max_size": 4},
    )


@pytest.mark.parametrize(
    ("mode", "blackout_s", "turns"),
    [("after_commit", 0.0, 4), ("before_send", 0.0, 4), ("after_commit", 7.0, 2)],
    ids=["cut-after-commit", "cut-before-send", "cut-after-commit-then-unreachable"],
)
async def test_cut_write_then_resend_yields_one_answer(
    relay: PgRelay, pg_dsn: str, pg_schema: str, mode: str, blackout_s: float, turns: int
) -> None:
    """The store reads the thread back for a few seconds (pool timeout 1 s, 4 tries); a
    blackout of 7 s outlasts that, so those turns raise the outcome-unknown error."""
    cp = _checkpointer(relay, pg_dsn, pg_schema)
    runs: list[str] = []
    app = _app(cp, runs)
    outcomes: list[str] = []
    try:
        for turn in range(turns):
            cfg = {"thread_id": f"cut-{mode}-{blackout_s}"}
            msg = Message.text_message(f"q{turn}", message_id=f"m-{turn}")
            # Turn 0 cuts the thread's first write (CHECKPOINT_CREATE); later turns cut the CAS.
            relay.arm(mode, blackout_s=blackout_s)
            try:
                out = await app.ainvoke({"messages": [msg]}, dict(cfg))
                outcomes.append("ok")
                assert [m.text() for m in out["messages"]] == [f"q{turn}", f"echo q{turn}"]
                assert "already_processed" not in out
            except CommitOutcomeUnknownError as exc:
                outcomes.append("unknown")
                assert exc.error_code == "STORAGE_COMMIT_UNKNOWN_001"
                assert exc.context["thread_id"] == cfg["thread_id"]
                assert "get_state" in str(exc) and "outcome" in str(exc)
                while relay.in_blackout():
                    await _sleep(0.1)
            assert relay.mode is None, "the relay never saw the checkpoint write"
            # The client retries with the same message: exactly one answer, the node ran once.
            again = await _retrying(app.ainvoke, {"messages": [msg]}, dict(cfg))
            assert again["already_processed"] is True
            assert [m.text() for m in again["messages"]] == [f"q{turn}", f"echo q{turn}"]
            state = await cp.aget_state(dict(cfg))
            assert state is not None
            assert _answers(state, f"q{turn}") == 1
            assert [m.message_id for m in state.context if m.role == "user"] == [
                f"m-{i}" for i in range(turn + 1)
            ]
        assert runs == [f"q{i}" for i in range(turns)]
        assert relay.cuts == turns
        if blackout_s:
            assert outcomes == ["unknown"] * turns
        else:
            # The store settles the outcome itself when it can read the thread back.
            assert outcomes == ["ok"] * turns
    finally:
        await cp.aclose()


async def _retrying(fn: Any, *args: Any) -> Any:
    """What a client does: retry a transient failure (the pool reconnects after an outage)."""
    for _ in range(100):
        try:
            return await fn(*args)
        except TransientStorageError:
            await _sleep(0.2)
    return await fn(*args)


async def _sleep(s: float) -> None:
    import anyio

    await anyio.sleep(s)


async def test_a_resent_write_recognises_its_own_commit_by_its_token(
    pg_dsn: str, pg_schema: str
) -> None:
    """The store-level contract the relay test relies on: the same write sent again (same token,
    so the same values bytes) after it committed succeeds as that commit; any other write for
    the same version is a conflict."""
    import dataclasses

    from tenxgraph.core.exceptions import StaleStateError

    cp = PgCheckpointer(pg_dsn, schema=pg_schema)
    await cp.asetup()
    source = cp.store.source
    try:
        key = cp.key_for({"thread_id": "tok", "user_id": "u"})
        state = AgentState(context=[Message.text_message("hi", message_id="m1")])
        w, _ = cp.build_write(key, state, None)
        assert w.token and w.token.startswith("-:0:")
        assert (await source.write(w)).version == 1
        assert (await source.write(w)).version == 1  # its own commit: success, nothing added
        assert await source.current_version(key) == 1
        other, _ = cp.build_write(key, state, None)  # same content, another write
        with pytest.raises(StaleStateError):
            await source.write(other)
        with pytest.raises(StaleStateError):  # without a token a write cannot be recognised
            await source.write(dataclasses.replace(w, token=""))
        # The CAS path (expected version 1) behaves the same.
        prev = await cp.aload({"thread_id": "tok", "user_id": "u"})
        w2, _ = cp.build_write(key, state.model_copy(update={"context_summary": "s"}), prev)
        assert (await source.write(w2)).version == 2
        assert (await source.write(w2)).version == 2
        assert [r.version for r in await source.history(key)] == [2, 1]
    finally:
        await cp.aclose()


async def test_outcome_unknown_comes_within_seconds_with_the_default_pool_timeout(
    relay: PgRelay, pg_dsn: str, pg_schema: str
) -> None:
    """The read-back after a cut is bounded by its own budget, not by the pool's timeout (30 s
    by default, which 4 tries used to wait in full): with the relay refusing every connection
    for a minute, the outcome-unknown error comes within seconds."""
    import time

    from tenxgraph.storage.postgres import READ_BACK_BUDGET_S

    cp = PgCheckpointer(
        relay.dsn(pg_dsn), schema=pg_schema, pool_config={"prepare_threshold": None}
    )
    direct = PgCheckpointer(pg_dsn, schema=pg_schema)
    app = _app(cp, [])
    cfg = {"thread_id": "bounded"}
    try:
        await app.ainvoke({"messages": [Message.text_message("q0", message_id="m-0")]}, dict(cfg))
        relay.arm("after_commit", blackout_s=60.0)
        started = time.monotonic()
        with pytest.raises(CommitOutcomeUnknownError):
            await app.ainvoke(
                {"messages": [Message.text_message("q1", message_id="m-1")]}, dict(cfg)
            )
        elapsed = time.monotonic() - started
        assert relay.in_blackout(), "the relay must still refuse connections"
        assert elapsed < 15.0, f"the read-back took {elapsed:.1f} s (budget {READ_BACK_BUDGET_S} s)"
        # The write did commit (cut after the commit): the server holds the second turn.
        state = await direct.aget_state(dict(cfg))
        assert state is not None and _answers(state, "q1") == 1
    finally:
        await cp.aclose()
        await direct.aclose()


@pytest.mark.parametrize(
    ("blackout_s", "turns"),
    [(0.0, 10), (30.0, 1)],
    ids=["black-holed-connection", "black-holed-network"],
)
async def test_a_connection_black_holed_after_commit_ends_within_the_bound(
    relay: PgRelay, pg_dsn: str, pg_schema: str, blackout_s: float, turns: int
) -> None:
    """Issue 29: the answer to a committed checkpoint write never comes and the connection
    stays open, silent in both directions. The call ends within ``answer_timeout_s`` plus the
    read-back budget (10 of 10 turns): committed (read back on another connection) or, when
    every new connection is black-holed too, ``CommitOutcomeUnknownError``. The turn is
    stored once either way."""
    import time

    from tenxgraph.storage.postgres import CHECK_TIMEOUT_S, READ_BACK_BUDGET_S

    answer_timeout_s = 1.0
    # the documented bound, plus scheduling slack
    bound = answer_timeout_s + CHECK_TIMEOUT_S + READ_BACK_BUDGET_S + 2.0
    cp = PgCheckpointer(
        relay.dsn(pg_dsn),
        schema=pg_schema,
        pool_config={"prepare_threshold": None, "timeout": 2.0, "max_size": 4},
        answer_timeout_s=answer_timeout_s,
    )
    direct = PgCheckpointer(pg_dsn, schema=pg_schema)
    runs: list[str] = []
    app = _app(cp, runs)
    cfg = {"thread_id": f"black-hole-{int(blackout_s)}"}
    try:
        await app.ainvoke({"messages": [Message.text_message("q0", message_id="m-0")]}, dict(cfg))
        for i in range(1, turns + 1):
            relay.arm("stall_after_commit", blackout_s=blackout_s)
            started = time.monotonic()
            msg = Message.text_message(f"q{i}", message_id=f"m-{i}")
            try:
                await app.ainvoke({"messages": [msg]}, dict(cfg))
                outcome = "committed"
            except CommitOutcomeUnknownError:
                outcome = "unknown"
            elapsed = time.monotonic() - started
            assert elapsed < bound, f"turn {i} took {elapsed:.1f} s (bound {bound:.1f} s)"
            assert relay.cuts == i
            if blackout_s:
                assert outcome == "unknown" and relay.in_blackout()
            else:
                assert outcome == "committed"
            state = await direct.aget_state(dict(cfg))
            assert state is not None and _answers(state, f"q{i}") == 1
        assert runs == [f"q{i}" for i in range(turns + 1)]
    finally:
        await cp.aclose()
        await direct.aclose()


async def test_answer_timeout_is_checked() -> None:
    from tenxgraph.core.exceptions import ConfigError

    for bad in (0, -1.0, "5", True):
        with pytest.raises(ConfigError) as ei:
            PgCheckpointer("postgresql://u@127.0.0.1/db", answer_timeout_s=bad)
        assert ei.value.context["key"] == "answer_timeout_s"
