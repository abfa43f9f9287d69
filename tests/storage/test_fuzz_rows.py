"""Fuzz: 1,000 random corruptions of stored rows per store (SQLite and Postgres), each followed by
every read API. Only errors of the tenxgraph family come out, nothing named in a payload is
imported or executed, list operations keep returning the undamaged threads, and the other
threads read back exactly as before. Seeded, so a failure replays.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tenxgraph.core.exceptions import SerializationError, TenxGraphError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.graph.tool_node import _decode as decode_ledger_result
from tenxgraph.core.state import AgentState, Message
from tenxgraph.records import LedgerEntry
from tenxgraph.storage import serde
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio

ROUNDS = 1000
SEED = 19
USER = "u"
VICTIMS = [f"victim-{i}" for i in range(3)]
CONTROL = "control"


class FuzzState(AgentState):
    counter: int = 0
    stamp: dt.datetime | None = None
    blob: bytes = b""
    tags: set[str] = set()


CANARY = "fuzz_canary_19"
_CANARY_SRC = """
from pathlib import Path
Path(__file__).with_suffix(".ran").write_text("imported")
class Boom:
    def __reduce__(self):
        return (print, ("executed",))
"""


def _payloads(rng: random.Random, original: bytes) -> bytes:
    """One corrupted version of a stored JSON payload."""
    choice = rng.randrange(14)
    if choice == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 48)))
    if choice == 1:
        return original[: rng.randrange(0, max(len(original), 1))]
    if choice == 2 and original:
        b = bytearray(original)
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if choice == 3:
        return rng.choice([b"[]", b"1", b"null", b'"x"', b"{}", b"true", b"[[]]", b"-0", b"1e999"])
    if choice == 4:
        depth = rng.choice([100, 300, 5000])
        return b"[" * depth + b"]" * depth
    if choice == 5:
        depth = rng.choice([100, 1000])
        return b'{"a":' * depth + b"1" + b"}" * depth
    if choice == 6:
        return b'{"counter": ' + b"9" * rng.choice([20, 400, 5000]) + b"}"
    if choice == 7:
        tag = rng.choice(
            [
                "dt",
                "dtz",
                "int",
                "float",
                "bytes",
                "barr",
                "td",
                "dec",
                "set",
                "tuple",
                "kdict",
                "u16",
                "uuid",
                "date",
                "time",
                "dict",
            ]
        )
        v = rng.choice(
            [
                '"not a value"',
                "[1]",
                "null",
                '"' + "9" * 5000 + '"',
                "[[1]]",
                '{"x": 1}',
                '"1e99999"',
                '"!!!"',
            ]
        )
        extra = ', "z": "../../etc/passwd"' if tag == "dtz" else ""
        field = rng.choice(
            ["stamp", "blob", "tags", "counter", "execution_meta", "role", "content"]
        )
        return f'{{"{field}": {{"__tx__": "{tag}", "v": {v}{extra}}}}}'.encode()
    if choice == 8:
        return (
            f'{{"__class__": "{CANARY}.Boom", "py/object": "{CANARY}.Boom", '
            f'"execution_meta": {{"__tx__": "{CANARY}.Boom", "v": 1}}}}'
        ).encode()
    if choice == 9:
        # A pickle stream that would import the canary if anything unpickled it.
        return b"\x80\x04\x95" + f"c{CANARY}\nBoom\n)R.".encode()
    if choice == 10:
        return b'{"execution_meta": {"status": "nonsense", "step": "x"}, "counter": "y"}'
    if choice == 11:
        return b'{"role": "wizard", "content": 5, "message_id": null}'
    if choice == 12:
        return b'{"v": 1, "messages": [{"role": "tool", "content": [{"type": "nope"}]}]}'
    return b"\xff\xfe" + "\ud800".encode("utf-8", "surrogatepass")


def _ranges(rng: random.Random, text: bool) -> Any:
    """A corrupted ``ranges`` value (JSON text for SQLite, an int8[] for Postgres)."""
    choice = rng.randrange(8)
    flat: list[Any]
    if choice == 6:  # NULL elements (an int8[] may hold them; JSON null in SQLite)
        flat = rng.choice([[None, None], [0, None], [None, 1], [0, 1, None, None]])
    elif choice == 7 and text:  # wrong-typed elements only JSON can hold
        flat = rng.choice([[True, 1], [0.5, 1], ["0", "1"], [[0], 1]])
    elif choice == 0:
        flat = [rng.randrange(-5, 50) for _ in range(rng.randrange(0, 7))]
    elif choice == 1:
        flat = [0, 2**62]
    elif choice == 2:
        flat = [5, 1]
    elif choice == 3:
        flat = [0, 1, 2]
    elif choice == 4:
        flat = [0, 10**6]
    else:
        flat = [-(2**62), 3]
    if not text:
        return flat
    if rng.random() < 0.3:
        return rng.choice(["", "[", "{}", "[[1]]", '[["a", "b"]]', "null", "[[1, 2, 3]]", "1e999"])
    return orjson.dumps([[a, b] for a, b in zip(flat[::2], flat[1::2], strict=False)]).decode()


class RawSqlite:
    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(str(path), isolation_level=None)
        self.conn.execute("PRAGMA busy_timeout = 5000")

    def get(self, table: str, column: str, where: dict[str, Any]) -> Any:
        cond = " AND ".join(f"{k} = ?" for k in where)
        return self.conn.execute(
            f'SELECT "{column}" FROM {table} WHERE {cond}', tuple(where.values())
        ).fetchone()[0]

    def set(self, table: str, column: str, where: dict[str, Any], value: Any) -> None:
        cond = " AND ".join(f"{k} = ?" for k in where)
        self.conn.execute(
            f'UPDATE {table} SET "{column}" = ? WHERE {cond}', (value, *where.values())
        )

    def keys(self, table: str, thread_id: str, key: str) -> list[Any]:
        return [
            r[0]
            for r in self.conn.execute(
                f"SELECT {key} FROM {table} WHERE thread_id = ?", (thread_id,)
            )
        ]

    def close(self) -> None:
        self.conn.close()


class RawPostgres:
    def __init__(self, dsn: str, schema: str, prefix: str = "tenxgraph_") -> None:
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.schema, self.prefix = schema, prefix

    def _t(self, table: str) -> str:
        return f'"{self.schema}"."{self.prefix}{table}"'

    def get(self, table: str, column: str, where: dict[str, Any]) -> Any:
        cond = " AND ".join(f"{k} = %s" for k in where)
        return self.conn.execute(
            f'SELECT "{column}" FROM {self._t(table)} WHERE {cond}', tuple(where.values())
        ).fetchone()[0]

    def set(self, table: str, column: str, where: dict[str, Any], value: Any) -> None:
        cond = " AND ".join(f"{k} = %s" for k in where)
        self.conn.execute(
            f'UPDATE {self._t(table)} SET "{column}" = %s WHERE {cond}', (value, *where.values())
        )

    def keys(self, table: str, thread_id: str, key: str) -> list[Any]:
        return [
            r[0]
            for r in self.conn.execute(
                f"SELECT {key} FROM {self._t(table)} WHERE thread_id = %s", (thread_id,)
            )
        ]

    def close(self) -> None:
        self.conn.close()


def _app(cp: Any) -> Any:
    async def step(state: FuzzState) -> dict[str, Any]:
        return {
            "messages": [Message.text_message(f"answer {state.counter}", role="assistant")],
            "counter": state.counter + 1,
            "stamp": dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
            "blob": b"\x00\x01",
            "tags": {"a", "b"},
        }

    g = StateGraph(FuzzState)
    g.add_node("step", step)
    g.set_entry_point("step")
    g.add_edge("step", END)
    return g.compile(checkpointer=cp)


async def _populate(cp: Any) -> None:
    app = _app(cp)
    for tid in [*VICTIMS, CONTROL]:
        cfg = {"thread_id": tid, "user_id": USER}
        for i in range(3):
            await app.ainvoke({"messages": [Message.text_message(f"q{i}")]}, dict(cfg))
        await cp.aput_thread(cfg, {"title": tid, "n": 1})
        result = serde.dumps({"v": 1, "messages": [Message.tool_message("42", tool_call_id="c1")]})
        await cp.aledger_put(cfg, LedgerEntry("k1", "c1", "calc", result, time.time()))


async def _read_everything(cp: Any, tid: str, errors: dict[str, int]) -> dict[str, Any]:
    """Call every read API on ``tid``; return what the list operations returned."""
    cfg = {"thread_id": tid, "user_id": USER}
    await cp.store.invalidate(cp.key_for(cfg))  # the LRU would answer from memory otherwise
    out: dict[str, Any] = {}

    async def call(name: str, fn: Any, *args: Any) -> Any:
        try:
            return await fn(*args)
        except TenxGraphError as exc:
            errors[f"{name}:{exc.error_code}"] = errors.get(f"{name}:{exc.error_code}", 0) + 1
            return None

    await call("get_state", cp.aget_state, dict(cfg), FuzzState)
    out["history"] = await call("history", cp.aget_state_history, dict(cfg), None, None, FuzzState)
    for v in (1, 2, 3):
        await call("version", cp.aget_version, dict(cfg), v, FuzzState)
    out["threads"] = await call("list_threads", cp.alist_threads, {"user_id": USER})
    await call("get_thread", cp.aget_thread, dict(cfg))
    await call("list_messages", cp.alist_messages, dict(cfg))
    entry = await call("ledger_get", cp.aledger_get, dict(cfg), "k1")
    if entry is not None:
        try:
            decode_ledger_result(entry.result, tid)
        except TenxGraphError as exc:
            errors[f"ledger_decode:{exc.error_code}"] = (
                errors.get(f"ledger_decode:{exc.error_code}", 0) + 1
            )
    return out


async def _fuzz(cp: Any, raw: Any, text_ranges: bool, tmp_path: Path) -> dict[str, int]:
    (tmp_path / f"{CANARY}.py").write_text(_CANARY_SRC)
    sys.path.insert(0, str(tmp_path))
    try:
        await _populate(cp)
        control_before = (
            await cp.aget_state({"thread_id": CONTROL, "user_id": USER}, FuzzState)
        ).model_dump()
        rng = random.Random(SEED)
        errors: dict[str, int] = {}
        for round_ in range(ROUNDS):
            tid = rng.choice(VICTIMS)
            target = rng.choice(
                ["values", "values", "message", "message", "metadata", "ledger", "ranges"]
            )
            if target == "values":
                where = {
                    "thread_id": tid,
                    "version": rng.choice(raw.keys("checkpoints", tid, "version")),
                }
                table, column = "checkpoints", "values"
            elif target == "ranges":
                where = {
                    "thread_id": tid,
                    "version": rng.choice(raw.keys("checkpoints", tid, "version")),
                }
                table, column = "checkpoints", "ranges"
            elif target == "message":
                where = {"thread_id": tid, "seq": rng.choice(raw.keys("messages", tid, "seq"))}
                table, column = "messages", "data"
            elif target == "metadata":
                where, table, column = {"thread_id": tid}, "threads", "metadata"
            else:
                where, table, column = {"thread_id": tid}, "tool_executions", "result"
            original = raw.get(table, column, where)
            if column == "ranges":
                bad: Any = _ranges(rng, text_ranges)
            else:
                as_bytes = original.encode() if isinstance(original, str) else bytes(original)
                bad = _payloads(rng, as_bytes)
                if isinstance(original, str):  # SQLite TEXT column: keep the storage class
                    bad = bad.decode("utf-8", "replace")
            raw.set(table, column, where, bad)
            try:
                seen = await _read_everything(cp, tid, errors)
                threads = seen["threads"]
                assert threads is not None, "list_threads failed as a whole"
                assert CONTROL in {t.thread_id for t in threads}
            finally:
                raw.set(table, column, where, original)
            if round_ % 100 == 0:
                st = await cp.aget_state({"thread_id": CONTROL, "user_id": USER}, FuzzState)
                assert st.model_dump() == control_before
        # Nothing named in a payload was imported or executed.
        assert CANARY not in sys.modules
        assert not (tmp_path / f"{CANARY}.ran").exists()
        # Every victim reads back exactly once restored; the control thread never changed.
        for tid in VICTIMS:
            await cp.store.invalidate(cp.key_for({"thread_id": tid, "user_id": USER}))
            st = await cp.aget_state({"thread_id": tid, "user_id": USER}, FuzzState)
            assert st.counter == 3 and len(st.context) == 6
        st = await cp.aget_state({"thread_id": CONTROL, "user_id": USER}, FuzzState)
        assert st.model_dump() == control_before
        return errors
    finally:
        sys.path.remove(str(tmp_path))


async def test_fuzzed_sqlite_rows_raise_only_family_errors(tmp_path: Path) -> None:
    path = tmp_path / "fuzz.db"
    cp = SqliteCheckpointer(str(path))
    await cp.asetup()
    raw = RawSqlite(path)
    try:
        errors = await _fuzz(cp, raw, True, tmp_path)
    finally:
        raw.close()
        await cp.aclose()
    # The corruptions did reach the decoders (not all swallowed as misses).
    assert sum(v for k, v in errors.items() if k.endswith("STORAGE_SERIALIZATION_000")) > 100, (
        errors
    )


@pytest.mark.postgres
async def test_fuzzed_postgres_rows_raise_only_family_errors(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    pytest.importorskip("psycopg_pool")
    from tenxgraph.storage.checkpointer import PgCheckpointer

    cp = PgCheckpointer(pg_dsn, schema=pg_schema)
    await cp.asetup()
    raw = RawPostgres(pg_dsn, pg_schema)
    try:
        errors = await _fuzz(cp, raw, False, tmp_path)
    finally:
        raw.close()
        await cp.aclose()
    assert sum(v for k, v in errors.items() if k.endswith("STORAGE_SERIALIZATION_000")) > 100, (
        errors
    )


async def _damage_one_and_list(cp: Any, raw: Any, caplog: pytest.LogCaptureFixture) -> None:
    await _populate(cp)
    raw.set(
        "threads",
        "metadata",
        {"thread_id": VICTIMS[0]},
        b"{broken" if isinstance(raw, RawPostgres) else "{broken",
    )
    raw.set(
        "checkpoints",
        "values",
        {"thread_id": VICTIMS[1], "version": 2},
        b'{"stamp": {"__tx__": "dt", "v": "yesterday"}}',
    )
    cfg = {"thread_id": VICTIMS[1], "user_id": USER}
    await cp.store.invalidate(cp.key_for(cfg))
    with caplog.at_level(logging.WARNING, logger="tenxgraph.storage"):
        threads = await cp.alist_threads({"user_id": USER})
        hist = await cp.aget_state_history(dict(cfg), None, None, FuzzState)
    # One damaged row does not hide the others, and each list call reports it once.
    assert {t.thread_id for t in threads} == {*VICTIMS[1:], CONTROL}
    assert [s.version for s in hist] == [3, 1]
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 2, skipped
    assert "list_threads skipped 1" in skipped[0] and "get_state_history skipped 1" in skipped[1]
    # Reading that version names the thread, the version and the JSONPath.
    with pytest.raises(SerializationError) as info:
        await cp.aget_version(dict(cfg), 2, FuzzState)
    assert info.value.context["thread_id"] == VICTIMS[1]
    assert info.value.context["version"] == 2
    assert info.value.context["path"] == "$.stamp"
    assert VICTIMS[1] in str(info.value) and "version 2" in str(info.value)


async def test_one_damaged_row_is_skipped_and_reported_once_sqlite(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "skip.db"
    cp = SqliteCheckpointer(str(path))
    raw = RawSqlite(path)
    try:
        await _damage_one_and_list(cp, raw, caplog)
    finally:
        raw.close()
        await cp.aclose()


@pytest.mark.postgres
async def test_one_damaged_row_is_skipped_and_reported_once_postgres(
    pg_dsn: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("psycopg_pool")
    from tenxgraph.storage.checkpointer import PgCheckpointer

    cp = PgCheckpointer(pg_dsn, schema=pg_schema)
    raw = RawPostgres(pg_dsn, pg_schema)
    try:
        await _damage_one_and_list(cp, raw, caplog)
    finally:
        raw.close()
        await cp.aclose()
