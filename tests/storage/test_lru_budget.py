"""A thread larger than the LRU's byte budget keeps its warm reads free of decoding.

Before, an entry whose size passed ``max_bytes`` was dropped (64 MiB by default, about 15,900
messages of ~200 characters counting the decoded objects' estimate), and every later run of
that thread decoded its whole history again: 36-50 ms per step at 16,000 messages instead of
about 1.2 ms. The most recently used entry is now kept even when it alone passes the budget
(everything else is evicted), so memory stays bounded by ``max_bytes`` plus the one thread in
use, whose decoded messages the running state holds anyway.
"""

from __future__ import annotations

import pytest

from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.reducers import add_messages
from tenxgraph.records import ThreadKey
from tenxgraph.storage import serde
from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tenxgraph.storage.layered import LayeredStore
from tenxgraph.storage.lru import LRUCache
from tenxgraph.storage.memory import MemoryStore

pytestmark = pytest.mark.anyio

BUDGET = 32 * 1024
TEXT = "a message of about two hundred characters, " * 5


async def _run(cp: BaseCheckpointer[AgentState], config: dict[str, str], steps: int) -> int:
    """One run: the first read, then ``steps`` appended checkpoints; how many messages the
    run's read decoded."""
    before = serde.messages_decoded()
    prev = await cp.aload(config)
    decoded = serde.messages_decoded() - before
    state = prev.state if prev is not None else AgentState()
    for _ in range(steps):
        new = Message(role="assistant", content=TEXT, metadata={"left": 1})
        state = state.model_copy(update={"context": add_messages(state.context, [new])})
        prev = await cp.acommit(config, state, prev)
        state = prev.state
    return decoded


@pytest.mark.parametrize("validate", [True, False], ids=["validated", "single-writer"])
async def test_a_thread_past_the_budget_is_not_decoded_again_each_run(validate: bool) -> None:
    lru = LRUCache(max_bytes=BUDGET)
    cp: BaseCheckpointer[AgentState] = BaseCheckpointer(
        LayeredStore(MemoryStore(), caches=[lru], validate=validate), state_history_limit=2
    )
    config = {"thread_id": "long", "user_id": "alice"}
    other = {"thread_id": "short", "user_id": "alice"}
    per_run = []
    for _ in range(40):  # 400 messages: about 25 times the budget with the decoded estimate
        per_run.append(await _run(cp, config, 10))
    assert per_run == [0] * len(per_run), per_run
    assert lru.stats()["bytes"] > BUDGET  # the thread alone is past the budget
    # another thread evicts it (the budget still bounds everything but the one in use) ...
    await _run(cp, other, 1)
    assert len(lru) == 1
    assert await lru.get(ThreadKey("long", "alice")) is None
    # ... and its next run decodes it once, after which its runs decode nothing again
    assert await _run(cp, config, 1) == 400
    assert await _run(cp, config, 1) == 0
    await cp.aclose()


async def test_an_entry_past_the_budget_is_kept_alone() -> None:
    lru = LRUCache(max_bytes=1000)
    small = ThreadKey("small", "alice")
    big = ThreadKey("big", "alice")
    from tenxgraph.records import StoredCheckpoint

    def rec(key: ThreadKey, n: int, size: int) -> StoredCheckpoint:
        return StoredCheckpoint(
            thread_id=key.thread_id,
            user_id=key.user_id,
            version=1,
            values=b"{}",
            ranges=((1, n + 1),) if n else (),
            messages=[b"x" * size] * n,
            next_seq=n + 1,
            status="running",
            created_at=1.0,
        )

    await lru.put(rec(small, 2, 100))
    await lru.put(rec(big, 5, 400))  # 2,002 bytes on its own
    assert await lru.get(small) is None
    got = await lru.get(big)
    assert got is not None and len(got.messages or ()) == 5
    assert lru.stats()["bytes"] == 2002 and len(lru) == 1
    await lru.put(rec(small, 2, 100))  # a newer entry evicts it: the budget holds again
    assert await lru.get(big) is None and lru.stats()["bytes"] <= lru.max_bytes


async def test_a_warm_read_reuses_the_message_id_index() -> None:
    """A thread last written with a plain list (``aput_state``) builds its id index once:
    the next warm read shares it instead of indexing every message again."""
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer

    cp: InMemoryCheckpointer = InMemoryCheckpointer()
    config = {"thread_id": "plain", "user_id": "alice"}
    msgs = [Message(role="user", content=f"m{i}") for i in range(5)]
    await cp.aput_state(config, AgentState.model_construct(context=list(msgs)))
    first = await cp.aload(config)
    second = await cp.aload(config)
    assert first is not None and second is not None
    assert [m.message_id for m in second.state.context] == [m.message_id for m in msgs]
    assert second.state.context.lineage is first.state.context.lineage
    assert second.state.context is not first.state.context  # each run has its own list
    await cp.aclose()
