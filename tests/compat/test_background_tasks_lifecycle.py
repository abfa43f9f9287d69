"""BackgroundTaskManager as 10xGraph's suite uses it: ``async with``, ``pending_count``, and a
second ``shutdown()`` that reports ``already_shutdown`` instead of waiting again."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tenxgraph.utils.background_task_manager import BackgroundTaskManager


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_async_with_cancels_what_is_still_running() -> None:
    cancelled = asyncio.Event()

    async def sleeper() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with BackgroundTaskManager(default_shutdown_timeout=5.0) as manager:
        manager.create_task(sleeper())
        await asyncio.sleep(0)
        assert manager.pending_count == 1
    assert cancelled.is_set()
    assert manager.pending_count == 0


@pytest.mark.anyio
async def test_second_shutdown_reports_already_shutdown_until_a_new_task() -> None:
    manager = BackgroundTaskManager()
    manager.create_task(asyncio.sleep(0.01))
    first, second, third = await asyncio.gather(
        manager.shutdown(), manager.shutdown(), manager.shutdown()
    )
    assert first["status"] == "completed"
    assert second["status"] == third["status"] == "already_shutdown"
    assert (await manager.shutdown()) == {"status": "already_shutdown", "tasks_remaining": 0}
    manager.create_task(asyncio.sleep(0))  # the manager is usable again
    assert (await manager.shutdown())["status"] == "completed"


@pytest.mark.anyio
async def test_failure_is_logged_at_error_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def boom() -> None:
        raise ValueError("nope")

    manager = BackgroundTaskManager()
    with caplog.at_level(logging.ERROR, logger="tenxgraph.utils.background_task_manager"):
        manager.create_task(boom(), name="boom")
        await manager.wait_for_all(timeout=5, return_exceptions=True)
    rec = next(r for r in caplog.records if "boom" in r.getMessage())
    assert rec.levelno == logging.ERROR
    assert rec.exc_info is not None
    assert isinstance(rec.exc_info[1], ValueError)


@pytest.mark.anyio
async def test_wait_for_all_forgets_finished_tasks_and_logs_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager = BackgroundTaskManager()

    async def quick() -> int:
        return 1

    async def broken() -> None:
        raise RuntimeError("disk on fire")

    for _ in range(3):
        manager.create_task(quick())
    assert await manager.wait_for_all() == [1, 1, 1]
    # forgotten when wait_for_all returns, not one loop step later
    assert manager.get_task_info() == []
    manager.create_task(broken())
    with caplog.at_level(logging.ERROR), pytest.raises(RuntimeError, match="disk on fire"):
        await manager.wait_for_all()
    assert any("disk on fire" in r.getMessage() for r in caplog.records)
    assert manager.get_task_info() == []
