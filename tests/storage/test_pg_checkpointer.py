"""``PgCheckpointer``: the facade's construction (DSN forms, application pools and clients,
``release_resources``) and its tiers. The guarantees themselves are in
``tests/conformance/test_graph_conformance.py``."""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.exceptions import ConfigError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import Message
from tenxgraph.utils import END

pytestmark = pytest.mark.postgres

pytest.importorskip("psycopg_pool")
from tenxgraph.storage.checkpointer import PgCheckpointer  # noqa: E402


def _app(cp: Any) -> Any:
    async def hello(state: Any) -> str:
        return "hello"

    g = StateGraph()
    g.add_node("hello", hello)
    g.set_entry_point("hello")
    g.add_edge("hello", END)
    return g.compile(checkpointer=cp)


def _tiers(cp: PgCheckpointer) -> list[str]:
    return [c.name for c in cp.store.caches] + [cp.store.source.name]


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"postgres_dsn": "postgresql://x@h/db", "pg_pool": object()},
        {"postgres_dsn": "postgresql://x@h/db", "user_id_type": "uuid"},
    ],
    ids=["neither", "both", "bad-user-id-type"],
)
def test_bad_construction_is_config_001(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as ei:
        PgCheckpointer(**kwargs)
    assert ei.value.error_code == "CONFIG_001"


def test_tiers_without_and_with_redis(pg_dsn: str) -> None:
    assert _tiers(PgCheckpointer(pg_dsn)) == ["lru", "postgresql"]
    cp = PgCheckpointer(
        pg_dsn, redis_url="redis://127.0.0.1:6379/0", cache_ttl=60, redis_prefix="p:"
    )
    assert _tiers(cp) == ["lru", "redis", "postgresql"]
    prefix = cp.store.caches[1].prefix
    assert cp.store.caches[1].ttl_s == 60
    assert prefix.startswith("p:") and len(prefix) == len("p:") + 13 and prefix.endswith(":")
    assert cp.state_history_limit == 20 and cp.enforce_user_isolation is True


@pytest.mark.anyio
@pytest.mark.parametrize("driver", ["postgresql+asyncpg", "postgresql+psycopg"])
async def test_sqlalchemy_dsn_is_accepted(pg_dsn: str, pg_schema: str, driver: str) -> None:
    assert pg_dsn.startswith("postgresql://")
    cp = PgCheckpointer(driver + pg_dsn[len("postgresql") :], schema=pg_schema)
    async with _app(cp) as app:
        cfg = {"thread_id": "t"}
        await app.ainvoke({"messages": [Message.text_message("hi")]}, cfg)
        assert cfg["_checkpoint_version"] == 1


@pytest.mark.anyio
@pytest.mark.redis
@pytest.mark.parametrize("release", [True, False])
async def test_application_pools_and_release_resources(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str, release: bool
) -> None:
    import redis.asyncio as aioredis
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=2, open=False
    )
    await pool.open()
    client = aioredis.Redis.from_url(redis_url)
    cp = PgCheckpointer(
        pg_pool=pool,
        redis=client,
        schema=pg_schema,
        redis_prefix=redis_prefix,
        release_resources=release,
    )
    assert _tiers(cp) == ["lru", "redis", "postgresql"]
    app = _app(cp)
    cfg = {"thread_id": "t-pool"}
    await app.ainvoke({"messages": [Message.text_message("hi")]}, cfg)
    assert cfg["_checkpoint_version"] == 1
    # A second instance over the same pool (no Redis) reads it from Postgres.
    assert [
        m.text()
        for m in (
            await _app(PgCheckpointer(pg_pool=pool, schema=pg_schema)).aget_state(
                {"thread_id": "t-pool"}
            )
        ).context
    ] == ["hi", "hello"]
    await app.aclose()
    assert pool.closed is release
    if not release:
        await client.ping()  # still usable
        await pool.close()
        await client.aclose()


def test_redis_namespace_follows_the_tables_not_the_dsn_spelling(pg_dsn: str) -> None:
    from tenxgraph.storage.checkpointer.postgres import redis_namespace

    base = redis_namespace(pg_dsn, "public", "tenxgraph_")
    assert (
        redis_namespace("postgresql+asyncpg" + pg_dsn[len("postgresql") :], "public", "tenxgraph_")
        == base
    )
    assert redis_namespace(pg_dsn, "other", "tenxgraph_") != base
    assert redis_namespace(pg_dsn, "public", "app_") != base
    assert redis_namespace(pg_dsn.rsplit("/", 1)[0] + "/otherdb", "public", "tenxgraph_") != base


@pytest.mark.anyio
@pytest.mark.redis
async def test_schemas_sharing_one_redis_never_see_each_other(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str
) -> None:
    """Two checkpointers over different schemas, one Redis, one key prefix: a thread
    id used in both stays two threads (no cached state crosses over, no spurious conflict)."""
    import uuid

    import psycopg

    other = pg_schema + "_b"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{other}"')
    a = PgCheckpointer(pg_dsn, schema=pg_schema, redis_url=redis_url, redis_prefix=redis_prefix)
    b = PgCheckpointer(pg_dsn, schema=other, redis_url=redis_url, redis_prefix=redis_prefix)
    tid = "shared-" + uuid.uuid4().hex
    try:
        await _app(a).ainvoke({"messages": [Message.text_message("in a")]}, {"thread_id": tid})
        assert await _app(b).aget_state({"thread_id": tid}) is None
        cfg = {"thread_id": tid}
        await _app(b).ainvoke({"messages": [Message.text_message("in b")]}, cfg)
        assert cfg["_checkpoint_version"] == 1
        st_a = await _app(a).aget_state({"thread_id": tid})
        st_b = await _app(b).aget_state({"thread_id": tid})
        assert [m.text() for m in st_a.context] == ["in a", "hello"]
        assert [m.text() for m in st_b.context] == ["in b", "hello"]
    finally:
        await a.aclose()
        await b.aclose()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{other}" CASCADE')
