"""ToolNode unit tests: execution, injection, parallelism and order, errors, and the ledger
(through a minimal in-test checkpointer that implements only ``aledger_get`` / ``aledger_put``)."""

from __future__ import annotations

import contextvars
import dataclasses
import datetime as dt
import logging
import threading
import time
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from tenxgraph.core._context import _RUN, RunContext, current_tool_call
from tenxgraph.core.exceptions import LedgerWriteError, StorageError
from tenxgraph.core.graph.tool_node import ToolNode, call_key_for, pending_tool_calls
from tenxgraph.core.state import AgentState, Message, ToolCallBlock, ToolResultBlock
from tenxgraph.models.base import assistant_message
from tenxgraph.records import LedgerEntry, ThreadKey
from tenxgraph.storage import serde
from tenxgraph.utils.decorators import tool

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """ToolNode is pure anyio: run every test on both event loops."""
    return request.param


class FakeLedger:
    """Just the two facade methods ToolNode uses, with switchable failures."""

    def __init__(self) -> None:
        self.rows: dict[str, LedgerEntry] = {}
        self.fail_read = False
        self.fail_write: BaseException | None = None
        self.puts: list[str] = []

    async def aledger_get(self, config: dict[str, Any], call_key: str) -> LedgerEntry | None:
        if self.fail_read:
            raise StorageError("read failed", error_code="STORAGE_TRANSIENT_001")
        return self.rows.get(call_key)

    async def aledger_put(self, config: dict[str, Any], entry: LedgerEntry) -> LedgerEntry:
        if self.fail_write is not None:
            raise self.fail_write
        self.puts.append(entry.call_key)
        return self.rows.setdefault(entry.call_key, entry)


@pytest.fixture
def ledger() -> FakeLedger:
    return FakeLedger()


@pytest.fixture
def run(ledger: FakeLedger):
    config = {"thread_id": "t1", "user_id": "u"}
    ctx = RunContext(checkpointer=ledger, config=config, key=ThreadKey("t1", "u"), node="TOOL")  # type: ignore[arg-type]
    token = _RUN.set(ctx)
    yield ctx
    _RUN.reset(token)


def state_with(
    *calls: dict[str, Any], message_id: str = "a1", history: list[Message] | None = None
) -> AgentState:
    msg = assistant_message("", list(calls), message_id=message_id)
    return AgentState(context=[*(history or [Message.text_message("hi")]), msg])


def results(msgs: list[Message]) -> list[Any]:
    return [b.content for m in msgs for b in m.content if isinstance(b, ToolResultBlock)]


# -- plain execution ---------------------------------------------------------------------------------
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_runs_outside_a_graph_without_ledger() -> None:
    node = ToolNode([add])
    out = await node(state_with({"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}), {})
    assert len(out) == 1
    msg = out[0]
    assert msg.role == "tool" and msg.tool_call_id == "c1"
    assert msg.content == [ToolResultBlock(tool_call_id="c1", content="5")]
    assert msg.metadata == {"tool_name": "add"}


async def test_only_unanswered_calls_of_last_assistant_run() -> None:
    calls = [
        {"id": "c1", "name": "add", "arguments": {"a": 1, "b": 1}},
        {"id": "c2", "name": "add", "arguments": {"a": 2, "b": 2}},
    ]
    state = state_with(*calls)
    state.context.append(Message.tool_message("2", tool_call_id="c1"))
    out = await ToolNode([add])(state, {})
    assert [m.tool_call_id for m in out] == ["c2"]
    # a final text answer: nothing pending
    state.context.append(Message.text_message("done", role="assistant"))
    assert await ToolNode([add])(state, {}) == []
    assert await ToolNode([add])(AgentState(), {}) == []


def test_pending_tool_calls_helper() -> None:
    state = state_with({"id": "x", "name": "add", "arguments": {}})
    msg, calls = pending_tool_calls(state.context)
    assert msg is state.context[-1] and [c.id for c in calls] == ["x"]


async def test_injected_params_and_contextvar() -> None:
    seen: dict[str, Any] = {}

    def sync_tool(q: str, tool_call_id: str, state: AgentState, config: dict) -> str:
        seen["sync"] = (tool_call_id, len(state.context), config["k"], current_tool_call())
        seen["sync_thread"] = threading.current_thread() is not threading.main_thread()
        return q

    async def async_tool(q: str, tool_call_id: str | None = None) -> str:
        seen["async"] = (tool_call_id, current_tool_call())
        return q.upper()

    node = ToolNode([sync_tool, async_tool])
    state = state_with(
        {"id": "s1", "name": "sync_tool", "arguments": {"q": "x"}},
        {"id": "a1", "name": "async_tool", "arguments": {"q": "y"}},
    )
    out = await node(state, {"k": 7})
    assert results(out) == ["x", "Y"]
    tcid, n, k, ctx = seen["sync"]
    assert (tcid, n, k) == ("s1", 2, 7)
    assert ctx.tool_call_id == "s1" and ctx.name == "sync_tool"
    assert ctx.call_key == call_key_for("a1", state.context[-1].tool_calls()[0])
    assert seen["sync_thread"] is True  # sync tools run off the event loop
    assert seen["async"][0] == "a1" and seen["async"][1].tool_call_id == "a1"
    assert current_tool_call() is None  # reset after the call
    # injected params are not in the schema
    schemas = node.tool_schemas()
    assert schemas[0]["function"]["parameters"] == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }


async def test_parallel_calls_keep_model_order() -> None:
    finished: list[str] = []

    async def slow(name: str, delay_s: float) -> str:
        await anyio.sleep(delay_s)
        finished.append(name)
        return name

    def slow_sync(name: str, delay_s: float) -> str:
        time.sleep(delay_s)
        finished.append(name)
        return name

    node = ToolNode([slow, slow_sync])
    state = state_with(
        {"id": "c1", "name": "slow", "arguments": {"name": "first", "delay_s": 0.3}},
        {"id": "c2", "name": "slow_sync", "arguments": {"name": "second", "delay_s": 0.15}},
        {"id": "c3", "name": "slow", "arguments": {"name": "third", "delay_s": 0.0}},
    )
    start = time.perf_counter()
    out = await node(state, {})
    elapsed = time.perf_counter() - start
    assert finished == ["third", "second", "first"]  # they really overlapped
    assert [m.tool_call_id for m in out] == ["c1", "c2", "c3"]  # model order kept
    assert results(out) == ["first", "second", "third"]
    assert elapsed < 0.45


# -- results -----------------------------------------------------------------------------------------
class Point(BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    w: int
    when: dt.date


async def test_result_shapes() -> None:
    def as_dict() -> dict:
        return {"a": [1, 2], "when": dt.date(2024, 1, 2)}

    def as_model() -> Point:
        return Point(x=1, y=2)

    def as_dataclass() -> Box:
        return Box(w=3, when=dt.date(2024, 1, 2))

    def as_none() -> None:
        return None

    def as_float() -> float:
        return 1.5

    def as_message(tool_call_id: str) -> Message:
        return Message.tool_message({"ok": True}, tool_call_id=tool_call_id, message_id="mine")

    node = ToolNode([as_dict, as_model, as_dataclass, as_none, as_float, as_message])
    names = ["as_dict", "as_model", "as_dataclass", "as_none", "as_float", "as_message"]
    state = state_with(*({"id": f"c{i}", "name": n, "arguments": {}} for i, n in enumerate(names)))
    out = await node(state, {})
    assert results(out) == [
        {"a": [1, 2], "when": "2024-01-02"},
        {"x": 1, "y": 2},
        {"w": 3, "when": "2024-01-02"},
        None,
        "1.5",
        {"ok": True},
    ]
    assert out[-1].message_id == "mine" and out[-1].tool_call_id == "c5"


async def test_tool_message_ids_are_deterministic() -> None:
    node = ToolNode([add])
    state = state_with({"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}})
    first = await node(state, {})
    second = await node(state, {})
    assert first[0].message_id == second[0].message_id


# -- errors become tool messages ------------------------------------------------------------------------
async def test_errors_become_error_tool_messages(caplog: pytest.LogCaptureFixture) -> None:
    def boom(x: int) -> int:
        raise ValueError("the database said no")

    async def sleepy() -> str:
        await anyio.sleep(5)
        return "late"

    def unencodable() -> object:
        return object()

    node = ToolNode([add, boom, sleepy, unencodable])
    state = state_with(
        {"id": "c1", "name": "nope", "arguments": {}},
        {"id": "c2", "name": "add", "arguments": {"a": "x"}},
        {"id": "c3", "name": "boom", "arguments": {"x": 1}},
        {"id": "c4", "name": "sleepy", "arguments": {}},
        {"id": "c5", "name": "unencodable", "arguments": {}},
        {"id": "c6", "name": "add", "arguments": '{"a": 1,'},
        {"id": "c7", "name": "add", "arguments": {"a": 1, "b": 2}},
    )
    out = await node(state, {"tool_timeout": 0.2})
    blocks = [m.content[0] for m in out]
    assert [b.tool_call_id for b in blocks] == ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]
    assert [b.is_error for b in blocks] == [True] * 6 + [False]
    texts = [b.content for b in blocks]
    assert texts[0] == "Error: unknown tool 'nope'; available tools: add, boom, sleepy, unencodable"
    assert texts[1].startswith(
        "Error: invalid arguments for tool 'add': a: Input should be a valid integer"
    )
    assert "b: Field required" in texts[1]
    assert texts[2] == "Error: tool 'boom' raised ValueError: the database said no"
    assert texts[3] == "Error: tool 'sleepy' timed out after 0.2 s"
    assert texts[4].startswith("Error: tool 'unencodable' returned a object that cannot be stored")
    assert texts[5] == "Error: the arguments for tool 'add' are not a JSON object: {\"a\": 1,"
    assert texts[6] == "3"


async def test_tool_raising_its_own_timeout_error_is_not_a_timeout() -> None:
    def t() -> str:
        raise TimeoutError("upstream")

    out = await ToolNode([t])(state_with({"id": "c1", "name": "t", "arguments": {}}), {})
    assert out[0].content[0].content == "Error: tool 't' raised TimeoutError: upstream"


async def test_duplicate_tool_names_refused() -> None:
    from tenxgraph.core.exceptions import GraphError

    @tool(name="add")
    def other(a: int) -> int:
        return a

    with pytest.raises(GraphError) as info:
        ToolNode([add, other])
    assert info.value.error_code == "GRAPH_001"


async def test_all_tools_and_tags() -> None:
    @tool(tags={"db", "read"})
    def read_user(user_id: int) -> str:
        """Read a user."""
        return ""

    @tool(tags=["web"])
    def web_search(query: str) -> str:
        """Search the web."""
        return ""

    node = ToolNode([read_user, web_search])
    assert [s["function"]["name"] for s in await node.all_tools()] == ["read_user", "web_search"]
    assert [s["function"]["name"] for s in await node.all_tools(tags={"db"})] == ["read_user"]
    assert [s["function"]["name"] for s in node.all_tools_sync(tags={"web"})] == ["web_search"]
    assert node.tool_schemas()[1] == {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }


# -- the ledger ----------------------------------------------------------------------------------------
async def test_ledger_records_then_hits(run: RunContext, ledger: FakeLedger) -> None:
    calls: list[int] = []

    def charge(amount: int) -> str:
        calls.append(amount)
        return f"charged {amount}"

    node = ToolNode([charge])
    state = state_with({"id": "c1", "name": "charge", "arguments": {"amount": 5}})
    first = await node(state, run.config)
    assert calls == [5]
    assert run.stats == {"tool_runs": 1}
    key = call_key_for("a1", state.context[-1].tool_calls()[0])
    assert list(ledger.rows) == [key]
    entry = ledger.rows[key]
    assert (entry.tool_call_id, entry.tool_name) == ("c1", "charge")
    assert serde.loads(entry.result)["v"] == 1
    # replay of the same node: answered from the ledger, identical messages
    second = await node(state, run.config)
    assert calls == [5]
    assert second == first
    assert run.stats == {"tool_runs": 1, "ledger_hits": 1}


async def test_call_key_shape() -> None:
    call = ToolCallBlock(id="c1", name="f", args={"b": 1, "a": [1, 2]})
    same = ToolCallBlock(id="c1", name="f", args={"a": [1, 2], "b": 1})
    other = ToolCallBlock(id="c1", name="f", args={"a": [1, 2], "b": 2})
    key = call_key_for("m1", call)
    assert key.startswith("m1:c1:") and len(key.split(":")[2]) == 16
    assert call_key_for("m1", same) == key  # canonical JSON: key order does not matter
    assert call_key_for("m1", other) != key
    assert call_key_for("m2", call) != key


async def test_reused_tool_call_id_for_different_call_runs(run: RunContext) -> None:
    calls: list[str] = []

    def lookup(q: str) -> str:
        calls.append(q)
        return q

    node = ToolNode([lookup])
    s1 = state_with(
        {"id": "call_0", "name": "lookup", "arguments": {"q": "first"}}, message_id="m1"
    )
    await node(s1, run.config)
    # same assistant message id and tool_call_id, different call: must run
    s2 = state_with(
        {"id": "call_0", "name": "lookup", "arguments": {"q": "second"}}, message_id="m1"
    )
    out = await node(s2, run.config)
    assert calls == ["first", "second"]
    assert results(out) == ["second"]
    # the same id reused in a later assistant message with the same call: runs too
    s3 = state_with(
        {"id": "call_0", "name": "lookup", "arguments": {"q": "first"}}, message_id="m2"
    )
    await node(s3, run.config)
    assert calls == ["first", "second", "first"]
    # but a true replay is a hit
    await node(s1, run.config)
    assert calls == ["first", "second", "first"]
    assert run.stats["ledger_hits"] == 1


async def test_errors_are_recorded_and_replayed(run: RunContext, ledger: FakeLedger) -> None:
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        raise RuntimeError("payment gateway timeout")

    node = ToolNode([flaky])
    state = state_with({"id": "c1", "name": "flaky", "arguments": {}})
    first = await node(state, run.config)
    second = await node(state, run.config)
    assert len(attempts) == 1
    assert first == second and first[0].content[0].is_error


async def test_ledger_read_failure_warns_and_runs(
    run: RunContext, ledger: FakeLedger, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    def f() -> str:
        calls.append(1)
        return "ok"

    node = ToolNode([f])
    state = state_with({"id": "c1", "name": "f", "arguments": {}})
    await node(state, run.config)
    ledger.fail_read = True
    with caplog.at_level(logging.WARNING, logger="tenxgraph.core.graph.tool_node"):
        out = await node(state, run.config)
    assert calls == [1, 1]
    assert results(out) == ["ok"]
    assert (
        "ledger read failed for tool 'f' call c1 on thread t1 (STORAGE_TRANSIENT_001)"
        in caplog.text
    )


async def test_ledger_write_failure_raises(run: RunContext, ledger: FakeLedger) -> None:
    ran: list[str] = []

    async def t(name: str, delay_s: float = 0.0) -> str:
        await anyio.sleep(delay_s)
        ran.append(name)
        return name

    node = ToolNode([t])
    state = state_with(
        {"id": "c1", "name": "t", "arguments": {"name": "a"}},
        {"id": "c2", "name": "t", "arguments": {"name": "b", "delay_s": 0.1}},
    )
    ledger.fail_write = RuntimeError("disk full")
    with pytest.raises(LedgerWriteError) as info:
        await node(state, run.config)
    err = info.value
    assert err.error_code == "STORAGE_LEDGER_001"
    assert err.context == {"thread_id": "t1", "tool_call_id": "c1", "tool": "t"}
    assert sorted(ran) == ["a", "b"]  # the sibling was let finish, not cut off


async def test_ledger_write_error_passthrough(run: RunContext, ledger: FakeLedger) -> None:
    ledger.fail_write = LedgerWriteError("table is read-only")
    node = ToolNode([add])
    with pytest.raises(LedgerWriteError) as info:
        await node(
            state_with({"id": "c1", "name": "add", "arguments": {"a": 1, "b": 1}}), run.config
        )
    assert info.value.context["tool_call_id"] == "c1"


async def test_forbidden_ledger_read_is_not_swallowed(run: RunContext, ledger: FakeLedger) -> None:
    async def forbidden(config: dict, call_key: str) -> None:
        raise StorageError("nope", error_code="STORAGE_FORBIDDEN_001")

    ledger.aledger_get = forbidden  # type: ignore[method-assign]
    with pytest.raises(StorageError) as info:
        await ToolNode([add])(
            state_with({"id": "c1", "name": "add", "arguments": {"a": 1, "b": 1}}), run.config
        )
    assert info.value.error_code == "STORAGE_FORBIDDEN_001"


async def test_racing_replay_winner_is_returned(run: RunContext, ledger: FakeLedger) -> None:
    state = state_with({"id": "c1", "name": "add", "arguments": {"a": 1, "b": 1}})
    key = call_key_for("a1", state.context[-1].tool_calls()[0])
    winner_msg = Message.tool_message("from the other process", tool_call_id="c1", message_id="w")
    winner = LedgerEntry(key, "c1", "add", serde.dumps({"v": 1, "messages": [winner_msg]}), 0.0)

    async def racing_get(config: dict, call_key: str) -> None:
        return None  # not there when we looked ...

    ledger.aledger_get = racing_get  # type: ignore[method-assign]
    ledger.rows[key] = winner  # ... but recorded before our put
    out = await ToolNode([add])(state, run.config)
    assert out[0].message_id == "w" and results(out) == ["from the other process"]


async def test_ledger_put_is_shielded_from_cancellation(
    run: RunContext, ledger: FakeLedger
) -> None:
    put_done = anyio.Event()
    original_put = ledger.aledger_put

    async def slow_put(config: dict, entry: LedgerEntry) -> LedgerEntry:
        await anyio.sleep(0.2)
        out = await original_put(config, entry)
        put_done.set()
        return out

    ledger.aledger_put = slow_put  # type: ignore[method-assign]

    async def quick() -> str:
        return "done"

    node = ToolNode([quick])
    state = state_with({"id": "c1", "name": "quick", "arguments": {}})
    with anyio.move_on_after(0.05):
        await node(state, run.config)
    assert put_done.is_set()
    assert len(ledger.rows) == 1


async def test_contextvar_isolated_between_parallel_calls(run: RunContext) -> None:
    seen: dict[str, str] = {}

    async def who(tag: str) -> str:
        await anyio.sleep(0.01 if tag == "a" else 0)
        ctx = current_tool_call()
        assert ctx is not None
        seen[tag] = ctx.tool_call_id
        return tag

    state = state_with(
        {"id": "ca", "name": "who", "arguments": {"tag": "a"}},
        {"id": "cb", "name": "who", "arguments": {"tag": "b"}},
    )
    await ToolNode([who])(state, run.config)
    assert seen == {"a": "ca", "b": "cb"}
    assert contextvars.copy_context().get(_RUN) is run


class FlakyLedger(FakeLedger):
    """Fails the first ``failures`` reads with a transient error, then answers."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.reads = 0

    async def aledger_get(self, config: dict[str, Any], call_key: str) -> LedgerEntry | None:
        self.reads += 1
        if self.reads <= self.failures:
            raise StorageError("read failed", error_code="STORAGE_TRANSIENT_001")
        return self.rows.get(call_key)


async def test_ledger_read_failing_twice_is_retried_and_the_tool_not_rerun() -> None:
    flaky = FlakyLedger(0)
    config = {"thread_id": "t1", "user_id": "u"}
    ctx = RunContext(checkpointer=flaky, config=config, key=ThreadKey("t1", "u"), node="TOOL")  # type: ignore[arg-type]
    token = _RUN.set(ctx)
    calls: list[int] = []

    def f() -> str:
        calls.append(1)
        return "ok"

    try:
        node = ToolNode([f])
        state = state_with({"id": "c1", "name": "f", "arguments": {}})
        first = await node(state, config)
        flaky.reads, flaky.failures = 0, 2
        second = await node(state, config)
    finally:
        _RUN.reset(token)
    assert calls == [1]  # the recorded call was answered from the ledger after two failures
    assert flaky.reads == 3
    assert first == second


async def test_ledger_read_retry_stays_within_the_tool_timeout(
    run: RunContext, ledger: FakeLedger
) -> None:
    def f() -> str:
        return "ok"

    node = ToolNode([f])
    state = state_with({"id": "c1", "name": "f", "arguments": {}})
    ledger.fail_read = True
    config = {**run.config, "tool_timeout": 0.3}
    t0 = time.monotonic()
    out = await node(state, config)
    assert results(out) == ["ok"]
    assert time.monotonic() - t0 < 2.0


async def test_damaged_ledger_entry_is_a_failed_read_not_a_raw_error(
    run: RunContext, ledger: FakeLedger
) -> None:
    calls: list[int] = []

    def f() -> str:
        calls.append(1)
        return "ok"

    node = ToolNode([f])
    state = state_with({"id": "c1", "name": "f", "arguments": {}})
    await node(state, run.config)
    for garbage in (b"{not json", b"[1, 2]", b'{"v": 1, "messages": [{"role": 7}]}', b"9" * 5000):
        for k, e in list(ledger.rows.items()):
            ledger.rows[k] = LedgerEntry(
                e.call_key, e.tool_call_id, e.tool_name, garbage, e.created_at
            )
        out = await node(state, run.config)
        assert results(out) == ["ok"]
    assert len(calls) == 5
