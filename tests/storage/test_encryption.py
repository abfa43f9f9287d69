"""Encryption at rest (``cipher=Keyring(...)``, docs/how-to/encryption.md) on real services.

* No plaintext of a marker reaches a Postgres table, the WAL of the run's writes, the SQLite
  file, or Redis, while an unencrypted control marker written the same way is found by the same
  scan (so the scans can see plaintext).
* A sealed row moved to another thread, user, version, position (or ledger call key) fails with
  ``DecryptionError`` on every read API; nothing of it is served.
* Crypto-shredding with ``TenantKeyrings``; fork, rewind and the state cache under a cipher;
  no plaintext in logs or error messages.
"""

from __future__ import annotations

import base64
import logging
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from _echo_app import echo_app

from tenxgraph.core.exceptions import ConfigError, DecryptionError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.runs import run_store
from tenxgraph.core.state import AgentState, Message
from tenxgraph.models import ScriptedModel
from tenxgraph.records import LedgerEntry
from tenxgraph.storage import crypto
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tenxgraph.storage.crypto import Keyring, TenantKeyrings, key_id_of
from tenxgraph.utils.constants import END

pytestmark = pytest.mark.anyio

K1, K2 = os.urandom(32), os.urandom(32)


def marker() -> str:
    return f"MARK-{uuid.uuid4().hex}"


def route(state: AgentState) -> str:
    last = state.context[-1]
    return "TOOL" if last.role == "assistant" and last.tool_calls() else END


def tool_app(cp: Any, mark: str) -> Any:
    """A model that calls ``lookup`` once per turn, then answers: every turn writes state,
    message rows and a ledger row, each holding ``mark``."""

    def lookup(query: str) -> str:
        """Look something up."""
        return f"result for {query}: {mark}"

    def answer(messages: list[Message], tools: Any) -> Any:
        if messages[-1].role == "tool":
            return {"content": f"answer {mark}"}
        return {
            "content": "",
            "tool_calls": [
                {
                    "id": f"call_{uuid.uuid4().hex[:8]}",
                    "name": "lookup",
                    "arguments": {"query": mark},
                }
            ],
        }

    g = StateGraph(AgentState)
    g.add_node("MAIN", Agent(model=ScriptedModel.from_fn(answer), tool_node="TOOL"))
    g.add_node("TOOL", ToolNode([lookup]))
    g.add_conditional_edges("MAIN", route, {"TOOL": "TOOL", END: END})
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=cp)


# -- the keyring and the envelope ---------------------------------------------------------------
def test_keyring_seals_and_binds_every_field() -> None:
    ring = Keyring({"k1": K1}, active="k1")
    blob = ring.seal(b'{"a": 1}', "messages", "alice", "t1", 3)
    assert key_id_of(blob) == "k1" and b'"a"' not in blob
    assert ring.open(blob, "messages", "alice", "t1", 3) == b'{"a": 1}'
    for where in [
        ("checkpoints", "alice", "t1", 3),
        ("messages", "bob", "t1", 3),
        ("messages", "alice", "t2", 3),
        ("messages", "alice", "t1", 4),
        ("messages", "alice", "t1", "3"),
    ]:
        with pytest.raises(DecryptionError) as info:
            ring.open(blob, *where)
        assert info.value.error_code == "STORAGE_CRYPTO_001"
        assert info.value.context["reason"] == "authentication"
    tampered = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(DecryptionError):
        ring.open(tampered, "messages", "alice", "t1", 3)
    # the key id is bound too: relabelling an envelope as another key of the ring fails
    both = Keyring({"k1": K1, "k2": K1}, active="k1")
    relabelled = blob.replace(b"k1", b"k2", 1)
    with pytest.raises(DecryptionError):
        both.open(relabelled, "messages", "alice", "t1", 3)
    with pytest.raises(DecryptionError) as info:
        Keyring({"k2": K2}, active="k2").open(blob, "messages", "alice", "t1", 3)
    assert info.value.context["reason"] == "unknown_key"
    with pytest.raises(DecryptionError) as info:
        ring.open(b'{"a": 1}', "messages", "alice", "t1", 3)
    assert info.value.context["reason"] == "not_sealed"
    assert "k1" in repr(ring) and K1.hex() not in repr(ring)


def test_keyring_refuses_bad_configuration() -> None:
    for keys, active in [
        ({}, "k1"),
        ({"k1": b"short"}, "k1"),
        ({"k1": "not bytes"}, "k1"),
        ({"": K1}, ""),
        ({"k\n1": K1}, "k\n1"),
        ({"k1": K1}, "k2"),
    ]:
        with pytest.raises(ConfigError) as info:
            Keyring(keys, active=active)  # type: ignore[arg-type]
        assert info.value.context["key"] == "cipher"
    with pytest.raises(ConfigError):
        InMemoryCheckpointer(cipher="secret")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        crypto.load_cipher("no-colon")
    with pytest.raises(ConfigError):
        crypto.load_cipher("tenxgraph.storage.crypto:nothing_here")


def test_keyring_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        crypto.KEYS_ENV, f"k1={base64.b64encode(K1).decode()},k2={base64.b64encode(K2).decode()}"
    )
    monkeypatch.setenv(crypto.ACTIVE_KEY_ENV, "k2")
    ring = crypto.load_cipher("tenxgraph.storage.crypto:keyring_from_env")
    assert isinstance(ring, Keyring) and ring.active == "k2" and ring.key_ids == ("k1", "k2")
    monkeypatch.setenv(crypto.KEYS_ENV, "k1=not base64!")
    with pytest.raises(ConfigError) as info:
        crypto.keyring_from_env()
    assert "not base64" not in str(info.value).split(":", 1)[0]


# -- backends ------------------------------------------------------------------------------------
class Backend:
    """A way to build checkpointers on one store, and raw SQL access to its tables."""

    def __init__(
        self,
        kind: str,
        make: Callable[..., Any],
        execute: Callable[..., list[tuple[Any, ...]]],
        table: Callable[[str], str],
    ) -> None:
        self.kind, self.make, self.execute, self.table = kind, make, execute, table

    def sql(self, text: str) -> str:
        """``{messages}`` style placeholders to the backend's table names, ``%s`` to its
        parameter style."""
        for t in ("threads", "checkpoints", "messages", "tool_executions"):
            text = text.replace("{" + t + "}", self.table(t))
        return text if self.kind == "postgres" else text.replace("%s", "?")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "sqlite":
        path = str(tmp_path / "enc.db")
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 5000")

        def execute(text: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
            return conn.execute(text, args).fetchall()

        def make(**kw: Any) -> Any:
            return SqliteCheckpointer(path, **kw)

        b = Backend("sqlite", make, execute, lambda t: t)
        b.path = path  # type: ignore[attr-defined]
        try:
            yield b
        finally:
            conn.close()
    else:
        pytest.importorskip("psycopg_pool")
        import psycopg

        from tenxgraph.storage.checkpointer import PgCheckpointer

        dsn: str = request.getfixturevalue("pg_dsn")
        schema: str = request.getfixturevalue("pg_schema")
        pconn = psycopg.connect(dsn, autocommit=True)

        def execute(text: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
            cur = pconn.execute(text, args)  # type: ignore[call-overload]
            return cur.fetchall() if cur.description else []

        def make(**kw: Any) -> Any:
            return PgCheckpointer(dsn, schema=schema, **kw)

        b = Backend("postgres", make, execute, lambda t: f'"{schema}".tenxgraph_{t}')
        b.schema = schema  # type: ignore[attr-defined]
        b.dsn = dsn  # type: ignore[attr-defined]
        try:
            yield b
        finally:
            pconn.close()


# -- no plaintext anywhere ---------------------------------------------------------------------------
def _wal_files(b: Backend, start: str, end: str) -> list[Path]:
    """The WAL segment files holding LSNs ``start`` to ``end`` (the server's data dir)."""
    data_dir = b.execute("SHOW data_directory")[0][0]
    first = b.execute("SELECT pg_walfile_name(%s::pg_lsn)", (start,))[0][0]
    last = b.execute("SELECT pg_walfile_name(%s::pg_lsn)", (end,))[0][0]
    wal = Path(data_dir) / "pg_wal"
    return sorted(p for p in wal.iterdir() if len(p.name) == 24 and first <= p.name <= last)


def _read_all(paths: list[Path]) -> bytes:
    """The bytes of the files of ``paths`` that exist, concatenated."""
    return b"".join(p.read_bytes() for p in paths if p.exists())


def _all_row_bytes(b: Backend) -> bytes:
    """Every value of every row of every tenxgraph table, raw (bytea as its bytes)."""
    if b.kind == "postgres":
        names = [
            r[0]
            for r in b.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s",
                (b.schema,),  # type: ignore[attr-defined]
            )
        ]
        tables = [f'"{b.schema}"."{n}"' for n in names]  # type: ignore[attr-defined]
    else:
        tables = [r[0] for r in b.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    out = bytearray()
    for t in tables:
        for row in b.execute(f"SELECT * FROM {t}"):
            for v in row:
                out += bytes(v) if isinstance(v, (bytes, memoryview)) else str(v).encode()
                out += b"\x00"
    return bytes(out)


async def test_no_plaintext_in_tables_wal_file_or_redis(
    backend: Backend, request: pytest.FixtureRequest
) -> None:
    secret, control = marker(), marker()
    ring = Keyring({"k1": K1}, active="k1")
    extra: dict[str, Any] = {}
    redis_prefix = None
    if backend.kind == "postgres":
        pytest.importorskip("redis")
        redis_prefix = request.getfixturevalue("redis_prefix")
        extra = {"redis_url": request.getfixturevalue("redis_url"), "redis_prefix": redis_prefix}
        start = backend.execute("SELECT pg_current_wal_lsn()::text")[0][0]
    cp = backend.make(cipher=ring, **extra)
    plain = backend.make(**extra)
    try:
        await cp.asetup()
        app = tool_app(cp, secret)
        cfg = {"thread_id": "enc", "user_id": "alice"}
        for i in range(3):
            await app.ainvoke({"messages": [f"question {i} {secret}"]}, dict(cfg))
        await cp.aput_state_cache(dict(cfg), await cp.aget_state(dict(cfg)))
        assert await cp.aledger_count(dict(cfg)) == 3
        out = await cp.aget_state(dict(cfg))
        assert secret in out.context[-1].text()  # readable through the cipher
        # the control: the same turns without a cipher
        await tool_app(plain, control).ainvoke(
            {"messages": [f"question {control}"]}, {"thread_id": "plain", "user_id": "alice"}
        )
    finally:
        await cp.aclose()
        await plain.aclose()

    rows = _all_row_bytes(backend)
    assert control.encode() in rows
    assert secret.encode() not in rows
    if backend.kind == "sqlite":
        path: str = backend.path  # type: ignore[attr-defined]
        raw = _read_all([Path(path), Path(path + "-wal")])
        assert control.encode() in raw
        assert secret.encode() not in raw
        return
    # WAL: every segment the run's writes went to
    backend.execute("SELECT pg_switch_wal()")
    end = backend.execute("SELECT pg_current_wal_lsn()::text")[0][0]
    files = _wal_files(backend, start, end)
    if not files or not os.access(files[0], os.R_OK):
        pytest.fail("the WAL files of the test server are not readable from the test")
    wal = _read_all(files)
    assert control.encode() in wal
    assert secret.encode() not in wal
    # Redis: every key and value under the prefix
    import redis

    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    try:
        blob = bytearray()
        keys = list(client.scan_iter(match=f"{redis_prefix}*"))
        sealed = 0
        for k in keys:
            blob += k
            kind = client.type(k)
            if kind == b"hash":
                for f, v in client.hgetall(k).items():
                    blob += f + v
                    sealed += f == b"values" and key_id_of(v) == "k1"
            elif kind == b"string":
                blob += client.get(k) or b""
    finally:
        client.close()
    assert sealed == 1  # the encrypted thread's copy is there, sealed
    # ... and served: a fresh process's Redis tier returns it (not refused as garbage)
    fresh = backend.make(cipher=ring, **extra)
    try:
        tier = next(c for c in fresh.store.caches if c.name == "redis")
        copy = await tier.get(fresh.key_for({"thread_id": "enc", "user_id": "alice"}))
        assert copy is not None and key_id_of(copy.values) == "k1"
        state = await fresh.aget_state({"thread_id": "enc", "user_id": "alice"})
        assert secret in state.context[-1].text()
    finally:
        await fresh.aclose()
    assert control.encode() in bytes(blob)
    assert secret.encode() not in bytes(blob)


# -- moved rows --------------------------------------------------------------------------------
async def _two_threads(b: Backend, ring: Keyring) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Threads A (alice) and B (bob), three echo turns each, same seqs and versions."""
    secret = marker()
    cp = b.make(cipher=ring)
    try:
        await cp.asetup()
        app = echo_app(cp)
        a = {"thread_id": "A", "user_id": "alice"}
        bb = {"thread_id": "B", "user_id": "bob"}
        for i in range(3):
            await app.ainvoke({"messages": [f"alice {i} {secret}"]}, dict(a))
            await app.ainvoke({"messages": [f"bob {i}"]}, dict(bb))
        for cfg in (a, bb):
            await cp.aledger_put(
                dict(cfg),
                LedgerEntry("call-1", "id-1", "lookup", f'{{"v": "{secret}"}}'.encode(), 1.0),
            )
    finally:
        await cp.aclose()
    return secret, a, bb


async def _every_read_fails(b: Backend, ring: Keyring, cfg: dict[str, Any], secret: str) -> None:
    """Every read API of thread ``cfg`` raises DecryptionError (fresh checkpointer: no cached
    copy) and none returns the secret."""
    cp = b.make(cipher=ring)
    try:
        reads: list[tuple[str, Callable[[], Any]]] = [
            ("get_state", lambda: cp.aget_state(dict(cfg))),
            ("get_state_history", lambda: cp.aget_state_history(dict(cfg))),
            ("get_version", lambda: cp.aget_version(dict(cfg), 3)),
            ("list_messages", lambda: cp.alist_messages(dict(cfg))),
            (
                "resume",
                lambda: echo_app(cp).ainvoke({"messages": ["again"]}, dict(cfg)),
            ),
        ]
        for name, call in reads:
            with pytest.raises(DecryptionError) as info:
                await call()
            assert info.value.error_code == "STORAGE_CRYPTO_001", name
            assert secret not in str(info.value), name
    finally:
        await cp.aclose()


async def test_a_row_moved_to_another_thread_or_user_fails_every_read(backend: Backend) -> None:
    ring = Keyring({"k1": K1}, active="k1")
    secret, a, bb = await _two_threads(backend, ring)
    # alice's message seq 1 copied over bob's seq 1 (another thread and another user)
    backend.execute(
        backend.sql(
            "UPDATE {messages} SET data = (SELECT data FROM {messages} WHERE thread_id = 'A' "
            "AND seq = 1) WHERE thread_id = 'B' AND seq = 1"
        )
    )
    await _every_read_fails(backend, ring, bb, secret)


async def test_a_thread_given_to_another_owner_fails_every_read(backend: Backend) -> None:
    ring = Keyring({"k1": K1}, active="k1")
    secret, a, _ = await _two_threads(backend, ring)
    backend.execute(backend.sql("UPDATE {threads} SET owner = 'mallory' WHERE thread_id = 'A'"))
    await _every_read_fails(backend, ring, {"thread_id": "A", "user_id": "mallory"}, secret)


async def test_state_moved_to_another_version_fails_every_read(backend: Backend) -> None:
    ring = Keyring({"k1": K1}, active="k1")
    secret, a, _ = await _two_threads(backend, ring)
    q = '"values"'
    backend.execute(
        backend.sql(
            f"UPDATE {{checkpoints}} SET {q} = (SELECT {q} FROM {{checkpoints}} WHERE "
            f"thread_id = 'A' AND version = 2) WHERE thread_id = 'A' AND version = 3"
        )
    )
    await _every_read_fails(backend, ring, a, secret)


async def test_messages_swapped_between_positions_fail_every_read(backend: Backend) -> None:
    ring = Keyring({"k1": K1}, active="k1")
    secret, a, _ = await _two_threads(backend, ring)
    rows = backend.execute(
        backend.sql("SELECT seq, data FROM {messages} WHERE thread_id = 'A' ORDER BY seq")
    )
    (s1, d1), (s2, d2) = rows[0], rows[1]
    upd = backend.sql("UPDATE {messages} SET data = %s WHERE thread_id = 'A' AND seq = %s")
    backend.execute(upd, (bytes(d2), s1))
    backend.execute(upd, (bytes(d1), s2))
    await _every_read_fails(backend, ring, a, secret)


async def test_a_ledger_row_moved_fails_the_ledger_read(backend: Backend) -> None:
    ring = Keyring({"k1": K1}, active="k1")
    secret, a, bb = await _two_threads(backend, ring)
    # alice's result over bob's row of the same call key (another thread and user) ...
    backend.execute(
        backend.sql(
            "UPDATE {tool_executions} SET result = (SELECT result FROM {tool_executions} WHERE "
            "thread_id = 'A') WHERE thread_id = 'B'"
        )
    )
    # ... and alice's row moved to another call key of her own thread
    backend.execute(
        backend.sql("UPDATE {tool_executions} SET call_key = 'call-2' WHERE thread_id = 'A'")
    )
    cp = backend.make(cipher=ring)
    try:
        for cfg, key in ((bb, "call-1"), (a, "call-2")):
            with pytest.raises(DecryptionError) as info:
                await cp.aledger_get(dict(cfg), key)
            assert info.value.context["table"] == "tool_executions"
            assert secret not in str(info.value)
    finally:
        await cp.aclose()


# -- rotation, shredding, time travel --------------------------------------------------------
def _key_ids(b: Backend) -> dict[str | None, int]:
    q = '"values"'
    out: dict[str | None, int] = {}
    for text in (
        f"SELECT {q} FROM {{checkpoints}}",
        "SELECT data FROM {messages}",
        "SELECT result FROM {tool_executions}",
    ):
        for (blob,) in b.execute(b.sql(text)):
            kid = key_id_of(bytes(blob))
            out[kid] = out.get(kid, 0) + 1
    return out


async def test_rotation_reseals_every_row_and_old_keys_can_go(backend: Backend) -> None:
    secret, a, bb = await _two_threads(backend, Keyring({"k1": K1}, active="k1"))
    assert set(_key_ids(backend)) == {"k1"}
    both = Keyring({"k1": K1, "k2": K2}, active="k2")
    cp = backend.make(cipher=both)
    try:
        report = await cp.arotate_keys(batch=3, min_age_s=0)
        assert report.resealed == {
            "checkpoints": 6,
            "messages": 12,
            "tool_executions": 2,
            "runs.input": 0,
            "runs.output": 0,
        }
        again = await cp.arotate_keys(batch=3, min_age_s=0)
        assert sum(again.resealed.values()) == 0  # resumable: nothing left to do
    finally:
        await cp.aclose()
    assert _key_ids(backend) == {"k2": 20}
    cp = backend.make(cipher=Keyring({"k2": K2}, active="k2"))
    try:
        state = await cp.aget_state(dict(a))
        assert secret in state.context[0].text()
        assert len(await cp.aget_state_history(dict(bb))) == 3
        entry = await cp.aledger_get(dict(a), "call-1")
        assert entry is not None and secret.encode() in entry.result
    finally:
        await cp.aclose()


async def test_crypto_shredding_with_tenant_keyrings(backend: Backend) -> None:
    rings = {"alice": Keyring({"a1": K1}, active="a1"), "bob": Keyring({"b1": K2}, active="b1")}
    tenants = TenantKeyrings(rings.get)
    cp = backend.make(cipher=tenants)
    try:
        app = echo_app(cp)
        a = {"thread_id": "ta", "user_id": "alice"}
        bb = {"thread_id": "tb", "user_id": "bob"}
        await app.ainvoke({"messages": ["alice's words"]}, dict(a))
        await app.ainvoke({"messages": ["bob's words"]}, dict(bb))
    finally:
        await cp.aclose()
    assert set(_key_ids(backend)) == {"a1", "b1"}
    del rings["alice"]  # the tenant's key is deleted: its rows are gone for good
    cp = backend.make(cipher=tenants)
    try:
        with pytest.raises(DecryptionError) as info:
            await cp.aget_state(dict(a))
        assert info.value.context["reason"] == "unknown_key"
        with pytest.raises(ConfigError):
            await echo_app(cp).ainvoke(
                {"messages": ["more"]}, {"thread_id": "new", "user_id": "alice"}
            )
        assert (await cp.aget_state(dict(bb))).context[0].text() == "bob's words"
        # rotation per tenant: bob's rows move to his new key; alice's cannot be opened
        rings["bob"] = Keyring({"b1": K2, "b2": K1}, active="b2")
        report = await cp.arotate_keys(min_age_s=0)
        no_runs = {"tool_executions": 0, "runs.input": 0, "runs.output": 0}
        assert report.resealed == {"checkpoints": 1, "messages": 2, **no_runs}
        assert report.unreadable == {"checkpoints": 1, "messages": 2, **no_runs}
        rings["bob"] = Keyring({"b2": K1}, active="b2")
        await cp.store.invalidate(cp.key_for(dict(bb)))
        assert (await cp.aget_state(dict(bb))).context[0].text() == "bob's words"
    finally:
        await cp.aclose()
    assert _key_ids(backend) == {"a1": 3, "b2": 3}


async def test_fork_rewind_and_state_cache_under_a_cipher(backend: Backend) -> None:
    ring = Keyring({"k1": K1}, active="k1")
    secret, a, _ = await _two_threads(backend, ring)
    cp = backend.make(cipher=ring)
    try:
        before = [m.text() for m in (await cp.aget_state(dict(a))).context]
        fork = await cp.afork(dict(a), 3, "A-fork")
        assert [m.text() for m in (await cp.aget_state(dict(fork))).context] == before
        # the fork's ledger rows were copied sealed for A: they open through forked_from
        entry = await cp.aledger_get(dict(fork), "call-1")
        assert entry is not None and secret.encode() in entry.result
        edited = await cp.afork(
            dict(a), 2, "A-edit", edit=lambda s: s.model_copy(update={"context": s.context[:1]})
        )
        assert len((await cp.aget_state(dict(edited))).context) == 1
        await cp.arewind(dict(a), 1)
        assert len((await cp.aget_state(dict(a))).context) == 2
        await echo_app(cp).ainvoke({"messages": ["after rewind"]}, dict(a))
        hist = await cp.aget_state_history(dict(a))
        assert hist[1].origin == {"op": "rewind", "version": 1}
        await cp.aput_state_cache(dict(a), await cp.aget_state(dict(a)))
        cached = await cp.aget_state_cache(dict(a))
        assert cached is not None and cached.context[-1].text() == "echo after rewind"
    finally:
        await cp.aclose()
    # no row of the forks shares a ciphertext with the source
    datas = backend.execute(backend.sql("SELECT thread_id, data FROM {messages}"))
    by_blob: dict[bytes, set[str]] = {}
    for tid, d in datas:
        by_blob.setdefault(bytes(d), set()).add(tid)
    assert all(len(tids) == 1 for tids in by_blob.values())


async def test_no_plaintext_in_logs_or_errors(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tenxgraph")
    ring = Keyring({"k1": K1}, active="k1")
    secret, a, bb = await _two_threads(backend, ring)
    backend.execute(
        backend.sql(
            "UPDATE {messages} SET data = (SELECT data FROM {messages} WHERE thread_id = 'A' "
            "AND seq = 1) WHERE thread_id = 'B' AND seq = 1"
        )
    )
    cp = backend.make(cipher=ring)
    try:
        for _ in range(2):
            with pytest.raises(DecryptionError) as info:
                await echo_app(cp).ainvoke({"messages": ["x"]}, dict(bb))
            assert secret not in repr(info.value) and secret not in str(info.value.context)
    finally:
        await cp.aclose()
    assert secret not in caplog.text


async def test_memory_checkpointer_seals_and_rotates() -> None:
    cp = InMemoryCheckpointer(cipher=Keyring({"k1": K1}, active="k1"))
    app = echo_app(cp)
    cfg = {"thread_id": "m", "user_id": "u"}
    await app.ainvoke({"messages": ["hello"]}, dict(cfg))
    t = cp.store.source._threads["m"]
    assert all(key_id_of(b) == "k1" for b in t.rows.values())
    cp.cipher = Keyring({"k1": K1, "k2": K2}, active="k2")
    report = await cp.arotate_keys(min_age_s=0)
    assert report.resealed["messages"] == 2 and report.resealed["checkpoints"] == 1
    assert all(key_id_of(b) == "k2" for b in t.rows.values())
    cp.cipher = Keyring({"k2": K2}, active="k2")
    await cp.store.invalidate(cp.key_for(dict(cfg)))
    assert (await cp.aget_state(dict(cfg))).context[-1].text() == "echo hello"
    with pytest.raises(ConfigError):
        await InMemoryCheckpointer().arotate_keys()


def test_documented_imports_in_a_fresh_interpreter() -> None:
    import subprocess
    import sys

    code = (
        "from tenxgraph.storage.crypto import Keyring, TenantKeyrings, keyring_from_env\n"
        "from tenxgraph.core.exceptions import DecryptionError\n"
        "assert DecryptionError().error_code == 'STORAGE_CRYPTO_001'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


async def test_cli_reads_and_rotates_an_encrypted_sqlite_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tenxgraph.cli import main

    db = str(tmp_path / "cli.db")
    cp = SqliteCheckpointer(db, cipher=Keyring({"k1": K1}, active="k1"))
    try:
        await echo_app(cp).ainvoke(
            {"messages": ["hello there"]}, {"thread_id": "c", "user_id": "u"}
        )
    finally:
        await cp.aclose()
    b64 = base64.b64encode
    monkeypatch.setenv(crypto.KEYS_ENV, f"k1={b64(K1).decode()},k2={b64(K2).decode()}")
    monkeypatch.setenv(crypto.ACTIVE_KEY_ENV, "k2")
    ring = "tenxgraph.storage.crypto:keyring_from_env"
    show = ["threads", "show", "c", "--user", "u", "--db", db]

    def run(argv: list[str]) -> int:
        return main(argv)

    assert await anyio_to_thread(run, show) == 5  # sealed rows, no keyring: damaged (5)
    assert "STORAGE_CRYPTO_001" in capsys.readouterr().err
    assert await anyio_to_thread(run, [*show, "--keyring", ring]) == 0
    assert "hello there" in capsys.readouterr().out
    assert await anyio_to_thread(run, ["rotate-keys", "--db", db]) == 2  # no keyring
    capsys.readouterr()
    rotate = ["rotate-keys", "--db", db, "--keyring", ring, "--min-age", "0", "--json"]
    assert await anyio_to_thread(run, rotate) == 0
    assert '"messages": 2' in capsys.readouterr().out
    with sqlite3.connect(db) as conn:
        kids = {key_id_of(bytes(r[0])) for r in conn.execute("SELECT data FROM messages")}
    assert kids == {"k2"}


async def anyio_to_thread(fn: Callable[[list[str]], int], argv: list[str]) -> int:
    """The CLI runs its own event loop: call it from a worker thread."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(fn, argv)


async def test_a_moved_ledger_row_fails_the_replay_of_a_resumed_run(backend: Backend) -> None:
    """A run resumed before its tool node answers the recorded call from the ledger; when that
    row holds another thread's ciphertext, the run fails with STORAGE_CRYPTO_001 instead of
    serving it (or silently running the tool again)."""
    ring = Keyring({"k1": K1}, active="k1")
    secret = marker()
    cp = backend.make(cipher=ring, state_history_limit=None)
    try:
        await cp.asetup()
        app = tool_app(cp, secret)
        a = {"thread_id": "LA", "user_id": "alice"}
        b = {"thread_id": "LB", "user_id": "alice"}
        await app.ainvoke({"messages": ["first"]}, dict(a))
        await app.ainvoke({"messages": ["other"]}, dict(b))
        hist = await cp.aget_state_history(dict(a))
        before_tool = next(s.version for s in hist if s.next_node == "TOOL")
        # the control: rewound before the tool node, the resumed run answers from the ledger
        await cp.arewind(dict(a), before_tool)
        out = await app.ainvoke(None, dict(a))
        assert secret in out["messages"][-1].text()
        await cp.arewind(dict(a), before_tool)
    finally:
        await cp.aclose()
    backend.execute(
        backend.sql(
            "UPDATE {tool_executions} SET result = (SELECT result FROM {tool_executions} WHERE "
            "thread_id = 'LB') WHERE thread_id = 'LA'"
        )
    )
    cp = backend.make(cipher=ring, state_history_limit=None)
    try:
        with pytest.raises(DecryptionError) as info:
            await tool_app(cp, "never").ainvoke(None, dict(a))
        assert info.value.context["table"] == "tool_executions"
    finally:
        await cp.aclose()


def test_a_checkpointer_of_your_own_refuses_a_cipher() -> None:
    from tenxgraph.storage.checkpointer import BaseCheckpointer

    class Mine(BaseCheckpointer[AgentState]):
        async def aget_state(self, config: dict[str, Any], state_cls: Any = None) -> Any:
            return None

        async def aput_state(self, config: dict[str, Any], state: AgentState) -> AgentState:
            return state

    Mine()  # fine without
    with pytest.raises(ConfigError) as info:
        Mine(cipher=Keyring({"k1": K1}, active="k1"))
    assert info.value.context["key"] == "cipher"


# -- background runs --------------------------------------------------------------------------
async def test_background_run_input_and_output_are_sealed_for_their_run(backend: Backend) -> None:
    """A submitted turn's text is in no table in clear; its result opens for its own run, and
    a result copied onto another run of another user fails to open there."""
    secret = marker()
    ring = Keyring({"k1": K1}, active="k1")
    cp = backend.make(cipher=ring)
    try:
        await cp.asetup()
        app = echo_app(cp)
        cfgs = [{"thread_id": "RA", "user_id": "alice"}, {"thread_id": "RB", "user_id": "bob"}]
        infos = [
            await app.asubmit({"messages": [f"{who} {secret}"]}, dict(cfg))
            for who, cfg in zip(("alice", "bob"), cfgs, strict=True)
        ]
        assert secret.encode() not in _all_row_bytes(backend)  # pending: input sealed
        async with app.recovery(listen=False, sweep_interval_s=0.05):
            done = [
                await app.ajoin(dict(cfg), info.run_id, timeout=60)
                for cfg, info in zip(cfgs, infos, strict=True)
            ]
        assert [d.status for d in done] == ["completed", "completed"]
        assert done[0].result is not None
        assert [m.text() for m in done[0].result["messages"]][0] == f"alice {secret}"
        assert secret.encode() not in _all_row_bytes(backend)  # completed: output sealed

        runs = backend.table("runs")
        p = "%s" if backend.kind == "postgres" else "?"
        (alice_out,) = backend.execute(
            f"SELECT output FROM {runs} WHERE run_id = {p}", (infos[0].run_id,)
        )[0]
        backend.execute(
            f"UPDATE {runs} SET output = {p} WHERE run_id = {p}",
            (bytes(alice_out), infos[1].run_id),
        )
        with pytest.raises(DecryptionError) as err:
            await app.aget_run(dict(cfgs[1]), infos[1].run_id)
        assert err.value.error_code == "STORAGE_CRYPTO_001"
        assert secret not in str(err.value)
    finally:
        await cp.aclose()


def _run_key_ids(b: Backend) -> dict[str, dict[str | None, int]]:
    """Key ids of the ``runs`` table's inputs and outputs (a NULL output: not counted)."""
    out: dict[str, dict[str | None, int]] = {"input": {}, "output": {}}
    for column, counts in out.items():
        rows = b.execute(f"SELECT {column} FROM {b.table('runs')} WHERE {column} IS NOT NULL")
        for (blob,) in rows:
            kid = key_id_of(bytes(blob))
            counts[kid] = counts.get(kid, 0) + 1
    return out


async def _runs_under(cp: Any, secret: str) -> tuple[list[dict[str, str]], list[str]]:
    """Two background runs (alice, bob) submitted and completed, and a third (alice, another
    thread) left pending; their configs and run ids."""
    await cp.asetup()
    app = echo_app(cp)
    cfgs = [
        {"thread_id": "RA", "user_id": "alice"},
        {"thread_id": "RB", "user_id": "bob"},
        {"thread_id": "RC", "user_id": "alice"},
    ]
    ids = [
        (await app.asubmit({"messages": [f"{c['user_id']} {secret}"]}, dict(c))).run_id
        for c in cfgs[:2]
    ]
    async with app.recovery(listen=False, sweep_interval_s=0.05):
        for cfg, run_id in zip(cfgs, ids, strict=False):
            assert (await app.ajoin(dict(cfg), run_id, timeout=60)).status == "completed"
    ids.append((await app.asubmit({"messages": [f"later {secret}"]}, dict(cfgs[2]))).run_id)
    return cfgs, ids


async def _check_runs_open_without_k1(cp: Any, cfgs: list[dict[str, str]], ids: list[str]) -> None:
    """Under a ring without ``k1``: the completed runs' results open, and the pending run
    (input re-sealed) completes."""
    app = echo_app(cp)
    for cfg, run_id in zip(cfgs[:2], ids[:2], strict=True):
        info = await app.aget_run(dict(cfg), run_id)
        assert info.status == "completed" and info.result is not None
        assert info.result["messages"][0].text().startswith(cfg["user_id"])
    async with app.recovery(listen=False, sweep_interval_s=0.05):
        late = await app.ajoin(dict(cfgs[2]), ids[2], timeout=60)
    assert late.status == "completed", late.last_error
    assert late.result is not None and late.result["messages"][0].text().startswith("later ")


async def test_rotation_reseals_background_run_payloads(backend: Backend) -> None:
    """``arotate_keys`` moves every run input and output (completed and pending runs) to the
    active key; a ring without the old key then reads the results and runs the pending run."""
    secret = marker()
    cp = backend.make(cipher=Keyring({"k1": K1}, active="k1"))
    try:
        cfgs, ids = await _runs_under(cp, secret)
    finally:
        await cp.aclose()
    assert _run_key_ids(backend) == {"input": {"k1": 3}, "output": {"k1": 2}}
    cp = backend.make(cipher=Keyring({"k1": K1, "k2": K2}, active="k2"))
    try:
        report = await cp.arotate_keys(batch=2, min_age_s=0)
        assert report.resealed["runs.input"] == 3 and report.resealed["runs.output"] == 2
        assert sum(report.unchanged.values()) == sum(report.unreadable.values()) == 0
        again = await cp.arotate_keys(batch=2, min_age_s=0)
        assert sum(again.resealed.values()) == 0  # resumable: nothing left to do
    finally:
        await cp.aclose()
    assert _run_key_ids(backend) == {"input": {"k2": 3}, "output": {"k2": 2}}
    assert set(_key_ids(backend)) == {"k2"}
    cp = backend.make(cipher=Keyring({"k2": K2}, active="k2"))
    try:
        await _check_runs_open_without_k1(cp, cfgs, ids)
    finally:
        await cp.aclose()
    assert _run_key_ids(backend) == {"input": {"k2": 3}, "output": {"k2": 3}}
    assert secret.encode() not in _all_row_bytes(backend)


async def test_rotation_reseals_background_run_payloads_in_memory() -> None:
    """The memory store's runs rotate too (its ring swapped in place: one store, one process)."""
    secret = marker()
    rings = {
        "alice": Keyring({"k1": K1}, active="k1"),
        "bob": Keyring({"k1": K1}, active="k1"),
    }
    cp = InMemoryCheckpointer(cipher=TenantKeyrings(rings.get))
    try:
        cfgs, ids = await _runs_under(cp, secret)
        store = run_store(echo_app(cp))

        async def key_ids() -> tuple[set[str | None], set[str | None]]:
            runs = await store.run_list("", limit=10)
            assert len(runs) == 3
            outs = {key_id_of(r.output) for r in runs if r.output is not None}
            return {key_id_of(r.input) for r in runs}, outs

        assert await key_ids() == ({"k1"}, {"k1"})
        for user in rings:
            rings[user] = Keyring({"k1": K1, "k2": K2}, active="k2")
        report = await cp.arotate_keys(batch=2, min_age_s=0)
        assert report.resealed["runs.input"] == 3 and report.resealed["runs.output"] == 2
        assert await key_ids() == ({"k2"}, {"k2"})
        for user in rings:
            rings[user] = Keyring({"k2": K2}, active="k2")
        await _check_runs_open_without_k1(cp, cfgs, ids)
    finally:
        await cp.aclose()


async def test_a_run_whose_input_does_not_open_ends_in_error_and_the_worker_goes_on(
    backend: Backend,
) -> None:
    """A pending run whose sealed input was moved from another run is marked ``error`` with
    the crypto code (its error text withheld under a cipher); the other run completes."""
    secret = marker()
    cp = backend.make(cipher=Keyring({"k1": K1}, active="k1"))
    try:
        await cp.asetup()
        app = echo_app(cp)
        a, b = {"thread_id": "MA", "user_id": "alice"}, {"thread_id": "MB", "user_id": "bob"}
        ra = await app.asubmit({"messages": [f"alice {secret}"]}, dict(a))
        rb = await app.asubmit({"messages": ["bob"]}, dict(b))
        runs = backend.table("runs")
        p = "%s" if backend.kind == "postgres" else "?"
        (bob_in,) = backend.execute(f"SELECT input FROM {runs} WHERE run_id = {p}", (rb.run_id,))[0]
        backend.execute(
            f"UPDATE {runs} SET input = {p} WHERE run_id = {p}", (bytes(bob_in), ra.run_id)
        )
        async with app.recovery(listen=False, sweep_interval_s=0.05):
            done_a = await app.ajoin(dict(a), ra.run_id, timeout=60)
            done_b = await app.ajoin(dict(b), rb.run_id, timeout=60)
        assert done_b.status == "completed"
        assert done_a.status == "error"
        assert done_a.last_error.startswith("STORAGE_CRYPTO_001: DecryptionError")
        assert secret not in done_a.last_error and "bob" not in done_a.last_error
    finally:
        await cp.aclose()


async def test_checkpoints_too_young_to_rotate_are_reported_not_passed_over(
    backend: Backend,
) -> None:
    """Fresh checkpoints are left for a later run (``min_age_s``) and counted as deferred, so
    a caller never takes "nothing left behind" for "every row is under the new key"."""
    await _two_threads(backend, Keyring({"k1": K1}, active="k1"))
    cp = backend.make(cipher=Keyring({"k1": K1, "k2": K2}, active="k2"))
    try:
        young = await cp.arotate_keys(batch=4, min_age_s=3600)
        assert young.resealed["checkpoints"] == 0 and young.deferred == 6
        assert young.as_dict()["deferred"] == 6
        done = await cp.arotate_keys(batch=4, min_age_s=0)
        assert done.resealed["checkpoints"] == 6 and done.deferred == 0
        assert (await cp.arotate_keys(batch=4, min_age_s=3600)).deferred == 0
    finally:
        await cp.aclose()
