"""The in-process side of lease wake-ups (``tenxgraph.storage._lease_wake``): which waiting
runs a release notification wakes. No I/O; the Postgres side is in test_lease_round_trips.py."""

from __future__ import annotations

import pytest

from tenxgraph.storage._lease_wake import LeaseWakeups

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_named_waiter_is_woken_and_no_other() -> None:
    hub = LeaseWakeups()
    w1, w2, other = hub.waiter("t", "r1"), hub.waiter("t", "r2"), hub.waiter("u", "r1")
    hub.dispatch('["t", "r1"]')
    assert await w1.wait(0.0)
    assert not await w2.wait(0.0) and not await other.wait(0.0)
    assert (hub.received, hub.woken) == (1, 1)


async def test_no_name_wakes_every_waiter_of_the_thread() -> None:
    hub = LeaseWakeups()
    w1, w2, other = hub.waiter("t", "r1"), hub.waiter("t", "r2"), hub.waiter("u", "r3")
    hub.dispatch('["t", null]')
    assert await w1.wait(0.0) and await w2.wait(0.0)
    assert not await other.wait(0.0)


async def test_a_wake_before_the_wait_is_kept_once() -> None:
    hub = LeaseWakeups()
    w = hub.waiter("t", "r")
    hub.dispatch('["t", "r"]')
    assert w.woken_at is not None
    assert await w.wait(5.0)  # returns at once: the wake came first
    assert not await w.wait(0.0)  # consumed


async def test_closed_waiters_and_bad_payloads_are_ignored() -> None:
    hub = LeaseWakeups()
    w = hub.waiter("t", "r")
    w.close()
    w.close()
    for payload in ('["t", "r"]', "not json", "[1]", '{"t": 1}', '[["t"], null]'):
        hub.dispatch(payload)
    assert hub.woken == 0 and hub.received == 5
    assert not await w.wait(0.0)


async def test_wake_all_reaches_every_thread() -> None:
    hub = LeaseWakeups()
    ws = [hub.waiter("t", "a"), hub.waiter("u", "b")]
    hub.wake_all()
    assert [await w.wait(0.0) for w in ws] == [True, True]
