"""Redis URLs and credentials against real servers: a URL whose password holds an unencoded
'@' or '/' is refused up front (redis-py would read it as "no host" and silently use
localhost:6379), and a password the server rejects is a permanent error (CLI exit 4), never
"unreachable" (exit 3)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from tenxgraph.cli import EXIT_PERMISSION, EXIT_USAGE, main
from tenxgraph.core.exceptions import ConfigError, StorageConnectionError
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.storage.redis import RedisCache, auth_error

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

RIGHT = "Right-redis-pw-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def locked_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A redis-server of this module's own, on a port of its own, that requires a password."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    port, tmp = _free_port(), tmp_path_factory.mktemp("locked-redis")
    subprocess.run(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--daemonize", "yes", "--dir", str(tmp),
         "--requirepass", RIGHT, "--pidfile", str(tmp / "redis.pid"),
         "--logfile", str(tmp / "redis.log")],
        check=True,
    )  # fmt: skip
    try:
        client = redis.Redis(port=port, password=RIGHT, socket_timeout=0.5)
        for _ in range(500):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        client.close()
        yield port
    finally:
        pid = Path(tmp / "redis.pid")
        if pid.exists():
            subprocess.run(["kill", pid.read_text().strip()], check=False)


def test_ambiguous_redis_url_is_refused_and_nothing_is_written(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    url = "redis://:WrongRedis@/xx@127.0.0.1:7417/0"
    for make in (
        lambda: RedisCache(url, prefix=redis_prefix),
        lambda: PgCheckpointer(pg_dsn, redis_url=url, schema=pg_schema, redis_prefix=redis_prefix),
    ):
        with pytest.raises(ConfigError) as info:
            make()
        assert info.value.error_code == "CONFIG_001" and "%40" in str(info.value)
        assert "WrongRedis" not in str(info.value)
    argv = ["setup", "--dsn", pg_dsn, "--schema", pg_schema, "--redis-prefix", redis_prefix]
    assert main([*argv, "--redis-url", url]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "WrongRedis" not in err, err
    # the default server (where redis-py would have gone) holds nothing of ours
    with redis.Redis.from_url(redis_url) as shared:
        assert list(shared.scan_iter(match=f"{redis_prefix}*")) == []


@pytest.mark.parametrize("password", ["Wrong-redis-pw-2", None])
def test_rejected_redis_password_is_permanent_and_exits_4(
    locked_redis: int, pg_dsn: str, pg_schema: str, password: str | None,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    auth = f":{password}@" if password else ""
    url = f"redis://{auth}127.0.0.1:{locked_redis}/0"

    async def ping() -> BaseException:
        client = aioredis.Redis.from_url(url)
        try:
            await client.ping()
        except Exception as exc:  # noqa: BLE001 - inspected below
            return exc
        finally:
            await client.aclose()
        raise AssertionError("the server accepted a wrong password")

    err = auth_error(asyncio.run(ping()), "127.0.0.1")
    assert isinstance(err, StorageConnectionError)
    assert err.context == {"backend": "redis", "reason": "password", "target": "127.0.0.1"}
    assert auth_error(ConnectionRefusedError("refused"), "x") is None
    code = main(["setup", "--dsn", pg_dsn, "--schema", pg_schema, "--redis-url", url])
    assert code == EXIT_PERMISSION
    line = capsys.readouterr().err
    assert len(line.strip().splitlines()) == 1 and "password" in line, line
    assert not password or password not in line
