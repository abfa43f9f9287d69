"""The run lease at the store level, the same rules on every source of truth (and through the
layered store, whose caches never take part): acquisition and its queue, fencing of checkpoint
writes, the release folded into a write, renewal, owner scope (issue 15, docs/how-to/run-lease.md).

Written against ``StoreTier.lease_*`` (``lease_read`` included: the acquisition folded into the
first read) and ``CheckpointWrite.fence`` / ``release`` only, so it
keeps checking the rules when the lease statements are folded into the read and write
statements."""

from __future__ import annotations

import anyio
import pytest

from tenxgraph.core.exceptions import StaleStateError, StorageError
from tenxgraph.storage.base import CheckpointWrite, StoreTier, ThreadKey

pytestmark = pytest.mark.anyio

KEY = ThreadKey("lease-thread", "owner")
TTL = 0.6


def checkpoint(expected: int, *, fence: int | None, release: bool = False) -> CheckpointWrite:
    return CheckpointWrite(
        thread_id=KEY.thread_id,
        user_id=KEY.user_id,
        expected_version=expected,
        values=b'{"context_summary":null}',
        new_messages=[],
        ranges=(),
        next_seq=1,
        status="running",
        history_limit=None,
        created_at=1000.0 + expected,
        fence=fence,
        release=release,
    )


async def take(store: StoreTier, holder: str, *, queue: bool = True, key: ThreadKey = KEY):
    return await store.lease_acquire(key, holder, ttl_s=TTL, lapse_s=TTL, queue=queue)


async def test_one_holder_at_a_time_and_each_grant_has_a_new_fence(store: StoreTier) -> None:
    a = await take(store, "run-a")
    assert a.fence is not None and a.expires_in_s == pytest.approx(TTL)
    b = await take(store, "run-b", queue=False)
    assert b.fence is None and 0 < b.expires_in_s <= TTL
    # the holder asking again (an attempt whose answer was lost) is granted, with a new fence
    a2 = await take(store, "run-a")
    assert a2.fence is not None and a2.fence > a.fence
    await store.lease_release(KEY, "run-a", a2.fence)
    b2 = await take(store, "run-b")
    assert b2.fence is not None and b2.fence > a2.fence


async def test_waiters_are_served_in_arrival_order(store: StoreTier) -> None:
    a = await take(store, "run-a")
    assert (await take(store, "run-b")).ahead == 0
    assert (await take(store, "run-c")).ahead == 1
    await store.lease_release(KEY, "run-a", a.fence)
    # c asks first after the release, but b arrived first
    c = await take(store, "run-c")
    assert c.fence is None and c.expires_in_s == 0.0 and c.ahead == 1
    peek = await store.lease_peek(KEY, "run-b", lapse_s=TTL)
    assert peek.expires_in_s == 0.0 and peek.ahead == 0
    b = await take(store, "run-b")
    assert b.fence is not None
    # a newcomer that does not queue cannot jump ahead of c either
    await store.lease_release(KEY, "run-b", b.fence)
    assert (await take(store, "run-d", queue=False)).fence is None
    assert (await take(store, "run-c")).fence is not None


async def test_a_waiter_not_seen_for_the_lapse_loses_its_place(store: StoreTier) -> None:
    a = await take(store, "run-a")
    await take(store, "run-b")  # queues, then goes away
    await store.lease_release(KEY, "run-a", a.fence)
    assert (await take(store, "run-c", queue=False)).fence is None
    await anyio.sleep(TTL + 0.1)
    assert (await take(store, "run-c", queue=False)).fence is not None


async def test_a_crashed_holders_lease_lapses(store: StoreTier) -> None:
    await take(store, "run-a")
    assert (await take(store, "run-b")).fence is None
    await anyio.sleep(TTL + 0.1)
    b = await take(store, "run-b")
    assert b.fence is not None
    assert not await store.lease_renew(KEY, "run-a", 1, TTL)  # the old holder lost it


async def test_renewal_keeps_the_lease(store: StoreTier) -> None:
    a = await take(store, "run-a")
    for _ in range(3):
        await anyio.sleep(TTL / 2)
        assert await store.lease_renew(KEY, "run-a", a.fence, TTL)
    assert (await take(store, "run-b", queue=False)).fence is None


async def test_a_stale_fence_cannot_commit_and_the_current_one_can(store: StoreTier) -> None:
    a = await take(store, "run-a")
    await store.write(checkpoint(0, fence=a.fence))  # the thread's first write is fenced too
    await anyio.sleep(TTL + 0.1)
    b = await take(store, "run-b")  # took over after the lapse
    with pytest.raises(StaleStateError) as info:
        await store.write(checkpoint(1, fence=a.fence))
    assert info.value.context["fence"] == a.fence
    assert await store.current_version(KEY) == 1  # nothing of the refused write
    rec = await store.write(checkpoint(1, fence=b.fence))
    assert rec.version == 2
    # a write without a fence is checked by the compare-and-swap alone, as before
    assert (await store.write(checkpoint(2, fence=None))).version == 3


async def test_the_last_write_releases_the_lease(store: StoreTier) -> None:
    a = await take(store, "run-a")
    await store.write(checkpoint(0, fence=a.fence, release=True))
    b = await take(store, "run-b", queue=False)
    assert b.fence is not None
    await store.write(checkpoint(1, fence=b.fence))
    assert (await take(store, "run-c", queue=False)).fence is None  # not released
    await store.write(checkpoint(2, fence=b.fence, release=True))
    assert (await take(store, "run-c", queue=False)).fence is not None


async def test_a_refused_write_does_not_release(store: StoreTier) -> None:
    a = await take(store, "run-a")
    await store.write(checkpoint(0, fence=a.fence))
    with pytest.raises(StaleStateError):
        await store.write(checkpoint(0, fence=a.fence, release=True))  # stale version
    assert (await take(store, "run-b", queue=False)).fence is None


async def test_another_users_thread_is_forbidden(store: StoreTier) -> None:
    a = await take(store, "run-a")
    await store.write(checkpoint(0, fence=a.fence, release=True))
    with pytest.raises(StorageError) as info:
        await take(store, "run-x", key=ThreadKey(KEY.thread_id, "intruder"))
    assert info.value.error_code == "STORAGE_FORBIDDEN_001"


async def read_leased(store: StoreTier, holder: str, known=None, *, key: ThreadKey = KEY):
    return await store.lease_read(key, known, holder, ttl_s=TTL, lapse_s=TTL, queue=True)


async def test_the_folded_first_read_takes_the_lease_and_reads_only_when_granted(
    store: StoreTier,
) -> None:
    a, rec = await read_leased(store, "run-a")
    assert a.fence is not None and rec is None  # granted; no thread yet
    await store.write(checkpoint(0, fence=a.fence))
    b, rec_b = await read_leased(store, "run-b")
    assert b.fence is None and rec_b is None and b.ahead == 0  # refused: nothing read
    await store.write(checkpoint(1, fence=a.fence, release=True))
    b, rec_b = await read_leased(store, "run-b")
    assert b.fence is not None and b.fence > a.fence
    assert rec_b is not None and rec_b.version == 2 and rec_b.messages == []
    assert rec_b.status == "running" and rec_b.created_at == 1001.0
    # the same lease as lease_acquire's: held by b now
    assert (await take(store, "run-c", queue=False)).fence is None
    await store.lease_release(KEY, "run-b", b.fence)
    # read against a copy that is still current
    c, rec_c = await read_leased(store, "run-c", rec_b)
    assert c.fence is not None and rec_c is not None and rec_c.version == 2
    with pytest.raises(StaleStateError):
        await store.write(checkpoint(2, fence=b.fence))  # b's fence is stale
    assert (await store.write(checkpoint(2, fence=c.fence))).version == 3


async def test_the_folded_first_read_of_another_users_thread_is_forbidden(
    store: StoreTier,
) -> None:
    a, _ = await read_leased(store, "run-a")
    await store.write(checkpoint(0, fence=a.fence, release=True))
    with pytest.raises(StorageError) as info:
        await read_leased(store, "run-x", key=ThreadKey(KEY.thread_id, "intruder"))
    assert info.value.error_code == "STORAGE_FORBIDDEN_001"
