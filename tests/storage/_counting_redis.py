"""A real redis-py asyncio client that records the name of every command it sends, for tests
that count Redis calls (no fake: the commands reach the real server)."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis


class CountingRedis(aioredis.Redis):
    """A real redis-py asyncio client that records every command it sends (upper-case names,
    in order, in ``commands``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.commands.append(str(args[0]).upper())
        return await super().execute_command(*args, **options)
