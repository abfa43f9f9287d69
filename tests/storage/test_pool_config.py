"""``pool_config`` / ``pg_pool=``: every key and value the store would not use is refused
(``CONFIG_001``) at construction, before any connection, instead of being ignored."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

pytest.importorskip("psycopg_pool")

import psycopg
from psycopg_pool import AsyncConnectionPool

from tenxgraph.core.exceptions import ConfigError
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.storage.postgres import PostgresStore

# nothing listens on port 1: a constructor that connected would fail with a storage error
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/test"


async def _noop(conn: Any) -> None:
    return None


BAD = {
    "not-a-dict": ([("max_size", 2)], "must be a dict"),
    "unknown-key": ({"maxsize": 2}, "maxsize"),
    "non-str-key": ({1: 2}, "keys must be strings"),
    "max_size-str": ({"max_size": "10"}, "'max_size' must be an int >= 1"),
    "max_size-zero": ({"max_size": 0}, "'max_size' must be an int >= 1"),
    "min_size-negative": ({"min_size": -1}, "'min_size' must be an int >= 0"),
    "min_size-bool": ({"min_size": True}, "'min_size' must be an int"),
    "max-below-min": ({"min_size": 5, "max_size": 2}, "below min_size"),
    "timeout-zero": ({"timeout": 0}, "'timeout' must be a positive"),
    "timeout-nan": ({"timeout": math.nan}, "'timeout' must be a positive"),
    "timeout-str": ({"timeout": "30"}, "'timeout' must be a positive"),
    "max_idle-inf": ({"max_idle": math.inf}, "'max_idle' must be a positive"),
    "num_workers-zero": ({"num_workers": 0}, "'num_workers' must be an int >= 1"),
    "max_waiting-float": ({"max_waiting": 1.5}, "'max_waiting' must be an int >= 0"),
    "name-int": ({"name": 3}, "'name' must be a string"),
    "connection_class": ({"connection_class": psycopg.Connection}, "AsyncConnection"),
    "configure-not-callable": ({"configure": "SET x"}, "'configure' must be an async callable"),
    "prepare_threshold-negative": ({"prepare_threshold": -1}, "'prepare_threshold'"),
    "kwargs-not-dict": ({"kwargs": "application_name=x"}, "'kwargs' must be a dict"),
    "kwargs-unknown-libpq-key": ({"kwargs": {"aplication_name": "x"}}, "aplication_name"),
}


@pytest.mark.parametrize(("pool_config", "match"), list(BAD.values()), ids=list(BAD))
def test_bad_pool_config_is_refused_at_construction(pool_config: Any, match: str) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError, match=match) as ei:
        PgCheckpointer(UNREACHABLE, pool_config=pool_config)
    assert time.monotonic() - started < 1.0  # no connection attempt, no retry
    assert ei.value.error_code == "CONFIG_001"
    assert ei.value.context == {"key": "pool_config"}
    assert str(ei.value).startswith("[CONFIG_001] pool_config: ")
    # the store refuses the same settings (the checkpointer only passes them on)
    with pytest.raises(ConfigError, match=match):
        PostgresStore(UNREACHABLE, pool_config=pool_config)


def test_every_documented_key_and_value_is_accepted() -> None:
    config = {
        "min_size": 0,
        "max_size": 3,
        "timeout": 2.5,
        "max_waiting": 0,
        "max_lifetime": 600,
        "max_idle": 60.0,
        "reconnect_timeout": 10,
        "num_workers": 1,
        "name": "agents",
        "connection_class": psycopg.AsyncConnection,
        "configure": _noop,
        "reset": None,
        "check": AsyncConnectionPool.check_connection,
        "prepare_threshold": None,
        "kwargs": {"application_name": "app", "options": "-c work_mem=4MB", "autocommit": True},
    }
    store = PostgresStore(UNREACHABLE, pool_config=config)
    assert store._pool_args["max_size"] == 3 and store._pool_args["name"] == "agents"
    assert store._conn_kwargs["application_name"] == "app"
    assert store._conn_kwargs["prepare_threshold"] is None
    # a min_size above the default max_size raises the default, not an explicit max_size
    assert PostgresStore(UNREACHABLE, pool_config={"min_size": 12})._pool_args["max_size"] == 12
    # the caller's dict is neither kept nor changed
    given = {"timeout": 1}
    PgCheckpointer(UNREACHABLE, pool_config=given)
    assert given == {"timeout": 1}


@pytest.mark.anyio
async def test_application_pool_takes_only_timeout(pg_dsn: str, pg_schema: str) -> None:
    pool = AsyncConnectionPool(
        pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=2, open=False
    )
    try:
        for key, value in [
            ("max_size", 20),
            ("min_size", 1),
            ("prepare_threshold", None),
            ("kwargs", {"application_name": "x"}),
            ("name", "p"),
        ]:
            with pytest.raises(ConfigError, match=rf"\['{key}'\] would be ignored") as ei:
                PgCheckpointer(pg_pool=pool, pool_config={key: value, "timeout": 1})
            assert ei.value.context == {"key": "pool_config"}
        with pytest.raises(ConfigError, match="'timeout' must be a positive"):
            PgCheckpointer(pg_pool=pool, pool_config={"timeout": -1})
        assert pool.closed  # nothing above opened the application's pool

        cp = PgCheckpointer(pg_pool=pool, pool_config={"timeout": 3}, schema=pg_schema)
        assert cp.store.source._pool_args["timeout"] == 3
        await cp.asetup()
        assert not pool.closed and pool.max_size == 2  # the application's sizing stands
        await cp.aclose()
    finally:
        await pool.close()


@pytest.mark.parametrize(
    "pool",
    ["postgresql://postgres@127.0.0.1/test", object(), psycopg.AsyncConnection],
    ids=["dsn-string", "object", "connection-class"],
)
def test_pg_pool_must_be_an_async_connection_pool(pool: Any) -> None:
    with pytest.raises(ConfigError, match="AsyncConnectionPool") as ei:
        PgCheckpointer(pg_pool=pool)
    assert ei.value.context == {"key": "pool"}
