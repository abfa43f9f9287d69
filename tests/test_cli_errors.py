"""The ``tenxgraph`` command under bad input: every failure is one line on stderr with its
documented exit code, read commands never create tables, output fits the terminal, a closed
pipe is quiet, and ``--json`` / ``--version`` / ``--all-users`` work."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tenxgraph.cli import EXIT_MISMATCH, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, main

ROOT = Path(__file__).resolve().parents[1]
PG_DSN = os.environ.get("TENXGRAPH_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def _cli(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tenxgraph.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def _one_line(err: str) -> str:
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite file with threads of alice (one with a 200-character id, one long) and bob."""
    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.storage.checkpointer import SqliteCheckpointer
    from tenxgraph.utils import END

    path = str(tmp_path_factory.mktemp("cli") / "ops.sqlite")
    cp = SqliteCheckpointer(path)
    g = StateGraph()
    g.add_node("MAIN", lambda state: "answer " * 30 + state.context[-1].text())
    g.add_edge("MAIN", END)
    g.set_entry_point("MAIN")
    app = g.compile(checkpointer=cp)
    for tid, user in (("a-1", "alice"), ("L" * 200, "alice"), ("b-1", "bob")):
        app.invoke({"messages": [Message.text_message("hi")]}, {"thread_id": tid, "user_id": user})
    big = AgentState(context=[Message.text_message(f"line {i} " * 20) for i in range(3000)])
    cp.put_state({"thread_id": "big", "user_id": "alice"}, big)
    cp.close()
    return path


def test_version() -> None:
    proc = _cli("--version")
    assert proc.returncode == EXIT_OK and proc.stdout.startswith("tenxgraph ")


def test_help_documents_every_exit_code() -> None:
    out = _cli("--help").stdout
    for fragment in (
        "0  ok",
        "1  not found",
        "2  usage",
        "3  storage unreachable",
        "4  permission",
    ):
        assert fragment in out
    assert "1  not found" in _cli("threads", "show", "--help").stdout


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        ([], "a command is required"),
        (["threads", "show", ""], "thread_id"),
        (["threads", "show", "a-1", "--user", "*"], "--all-users"),
        (["threads", "history", "a-1", "--user", "*"], "--all-users"),
        (["threads", "list", "--user", "*"], "--all-users"),
        (["threads", "list", "--limit", "0"], "at least 1"),
        (["threads", "history", "a-1", "--limit", "0"], "at least 1"),
        (["threads", "history", "a-1", "--limit", "x"], "not an integer"),
        (["threads", "show", "a-1", "--user", "bob", "--all-users"], "not allowed"),
        (["threads", "delete", "a-1"], "--yes"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(db: str, argv: list[str], fragment: str) -> None:
    if argv and argv[0] == "threads":
        argv = [*argv, "--db", db]
    proc = _cli(*argv)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert fragment in _one_line(proc.stderr)
    assert "Traceback" not in proc.stderr


def test_not_found_is_exit_1(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["threads", "show", "b-1", "--db", db, "--user", "alice"]) == EXIT_MISMATCH
    assert "not found" in _one_line(capsys.readouterr().err)
    assert main(["threads", "history", "nope", "--db", db, "--all-users"]) == EXIT_MISMATCH
    assert "not found for any user" in _one_line(capsys.readouterr().err)


def test_all_users_is_the_admin_scope(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["threads", "list", "--db", db, "--all-users", "--json"]) == EXIT_OK
    owners = {t["thread_id"]: t["user_id"] for t in json.loads(capsys.readouterr().out)}
    assert owners["b-1"] == "bob" and owners["a-1"] == "alice"
    assert main(["threads", "show", "b-1", "--db", db, "--all-users", "--json"]) == EXIT_OK
    shown = json.loads(capsys.readouterr().out)
    assert shown["user_id"] == "bob" and shown["version"] == 1
    assert main(["threads", "history", "b-1", "--db", db, "--user", "bob", "--json"]) == EXIT_OK
    assert [s["version"] for s in json.loads(capsys.readouterr().out)] == [1]


def test_tables_fit_the_terminal(db: str) -> None:
    for argv in (
        ["threads", "list", "--db", db, "--user", "alice"],
        ["threads", "list", "--db", db, "--all-users"],
        ["threads", "show", "a-1", "--db", db, "--user", "alice"],
    ):
        proc = _cli(*argv, columns=60)
        assert proc.returncode == EXIT_OK, proc.stderr
        assert max(len(line) for line in proc.stdout.splitlines()) <= 60, proc.stdout
    listing = _cli("threads", "list", "--db", db, "--user", "alice", columns=60).stdout
    long_row = next(line for line in listing.splitlines() if line.startswith("LLL"))
    assert "L…" in long_row


def test_closed_pipe_is_quiet(db: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tenxgraph.cli", "threads", "show", "big", "--db", db,
         "--user", "alice"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == EXIT_OK
    assert b"thread big" in first
    assert err == b""


# -- read commands never write DDL ------------------------------------------------------------------
@pytest.fixture
def absent_schema() -> Iterator[str]:
    name = "t_absent_" + uuid.uuid4().hex[:10]
    yield name
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _schema_exists(name: str) -> bool:
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (name,)
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.postgres
@pytest.mark.parametrize("action", [["list"], ["show", "t"], ["history", "t"]])
def test_read_commands_never_create_the_schema(
    absent_schema: str, action: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["threads", *action, "--dsn", PG_DSN, "--schema", absent_schema, "--user", "a"])
    assert code == EXIT_USAGE
    line = _one_line(capsys.readouterr().err)
    assert f"tenxgraph setup --dsn '{PG_DSN}' --schema {absent_schema}" in line
    assert not _schema_exists(absent_schema)
    # setup is the one command that creates it; then the read works
    assert main(["setup", "--dsn", PG_DSN, "--schema", absent_schema]) == EXIT_OK
    assert _schema_exists(absent_schema)
    capsys.readouterr()
    expected = EXIT_OK if action == ["list"] else EXIT_MISMATCH
    assert main(["threads", *action, "--dsn", PG_DSN, "--schema", absent_schema]) == expected


def test_read_commands_never_create_sqlite_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.sqlite"
    sqlite3.connect(path).close()  # an existing file without tenxgraph tables
    assert main(["threads", "list", "--db", str(path)]) == EXIT_USAGE
    assert f"tenxgraph setup --db {path}" in _one_line(capsys.readouterr().err)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("dsn", "code", "fragment"),
    [
        ("postgresql://no_such_role_y:Pw-secret-77@127.0.0.1:5432/test", EXIT_USAGE, "role"),
        ("postgresql://postgres:Pw-secret-77@127.0.0.1:5432/no_such_db_y", EXIT_USAGE, "database"),
        ("postgresql://postgres:Pw-secret-77@127.0.0.1:9/test", EXIT_UNREACHABLE, "not reachable"),
    ],
)
def test_connection_failures_exit_codes(
    dsn: str, code: int, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["setup"], ["threads", "list"]):
        assert main([*argv, "--dsn", dsn, "--timeout", "1"]) == code
        line = _one_line(capsys.readouterr().err)
        assert fragment in line and "Pw-secret-77" not in line


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize(
    ("redis_url", "code", "fragment"),
    [
        ("redis://127.0.0.1:9/0", EXIT_UNREACHABLE, "Redis is not reachable"),
        ("redis://no_such_user_z:Rd-secret-55@127.0.0.1:6379/0", 4, "refused the credentials"),
    ],
)
def test_a_redis_url_that_does_not_work_is_reported(
    absent_schema: str, redis_url: str, code: int, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The library reads on without an unreachable Redis; a command given a Redis URL says
    that the URL does not work, on one line, with the documented exit code."""
    assert main(["setup", "--dsn", PG_DSN, "--schema", absent_schema]) == EXIT_OK
    capsys.readouterr()
    argv = ["--dsn", PG_DSN, "--schema", absent_schema, "--redis-url", redis_url, "--user", "a"]
    assert main(["threads", "list", *argv]) == code
    line = _one_line(capsys.readouterr().err)
    assert fragment in line and "Rd-secret-55" not in line


# -- table output: stored strings are escaped and measured in terminal columns -----------------------
def _columns_of(line: str) -> int:
    """Terminal columns of ``line`` (wide East Asian characters take two)."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in line)


EVIL = "evil\x1b[2J\tid\nx"
WIDE = "中文线程标识符" * 4
LONG_OWNER = "owner-with-16chr"


@pytest.fixture(scope="module")
def odd_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Threads with an escape sequence, a tab and a newline in the id, a wide CJK id, and a
    16-character owner."""
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.storage.checkpointer import SqliteCheckpointer

    path = str(tmp_path_factory.mktemp("cli-odd") / "odd.sqlite")
    cp = SqliteCheckpointer(path)
    for tid, user in ((EVIL, LONG_OWNER), (WIDE, LONG_OWNER), ("plain", "bob")):
        text = "hello \x1b[31mred\x07 中文"
        cp.put_state(
            {"thread_id": tid, "user_id": user}, AgentState(context=[Message.text_message(text)])
        )
    cp.close()
    return path


@pytest.mark.parametrize("columns", [40, 50, 60, 67, 80])
def test_tables_escape_control_characters_and_fit_wide_text(odd_db: str, columns: int) -> None:
    for argv in (
        ["threads", "list", "--db", odd_db, "--all-users"],
        ["threads", "list", "--db", odd_db, "--user", LONG_OWNER],
        ["threads", "show", EVIL, "--db", odd_db, "--user", LONG_OWNER],
        ["threads", "history", WIDE, "--db", odd_db, "--user", LONG_OWNER],
    ):
        proc = _cli(*argv, columns=columns)
        assert proc.returncode == EXIT_OK, proc.stderr
        assert "\x1b" not in proc.stdout and "\t" not in proc.stdout and "\x07" not in proc.stdout
        lines = proc.stdout.splitlines()
        assert max(_columns_of(line) for line in lines) <= columns, proc.stdout
        if argv[1] != "history":
            assert "evil\\x1b[2J" in proc.stdout or "中文" in proc.stdout
    listing = _cli("threads", "list", "--db", odd_db, "--all-users", columns=columns).stdout
    assert len(listing.splitlines()) == 5  # header, three rows, count: no row broken in two
    assert "plain" in listing and "bob" in listing


def test_json_output_keeps_stored_strings_as_they_are(odd_db: str) -> None:
    proc = _cli("threads", "list", "--db", odd_db, "--all-users", "--json", columns=40)
    assert proc.returncode == EXIT_OK
    assert {t["thread_id"] for t in json.loads(proc.stdout)} == {EVIL, WIDE, "plain"}


@pytest.mark.postgres
def test_permanent_failure_is_reported_without_waiting_for_the_timeout() -> None:
    """Loose on purpose (a loaded 2-core machine): the CLI, interpreter start included, answers
    an unknown role well before its 30 s --timeout."""
    import time

    t0 = time.monotonic()
    proc = _cli("threads", "list", "--dsn", "postgresql://no_such_role_t@127.0.0.1:5432/test",
                "--timeout", "30")  # fmt: skip
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "no_such_role_t" in _one_line(proc.stderr)
    assert time.monotonic() - t0 < 5.0


def _damaged_copy(tmp_path: Path) -> str:
    """A SQLite file whose thread ``d-1`` has version 1 readable and version 2 damaged."""
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.storage.checkpointer import SqliteCheckpointer

    path = str(tmp_path / "damaged.sqlite")
    cp = SqliteCheckpointer(path)
    cfg = {"thread_id": "d-1", "user_id": "alice"}
    cp.put_state(dict(cfg), AgentState(context=[Message.text_message("one")]))
    cp.put_state(
        dict(cfg), AgentState(context=[Message.text_message("one"), Message.text_message("two")])
    )
    cp.close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "UPDATE checkpoints SET ranges = '[[null, null]]' WHERE thread_id = 'd-1' AND version = 2"
        )
    conn.close()
    return path


def test_damaged_stored_data_is_exit_5_naming_thread_and_version(tmp_path: Path) -> None:
    from tenxgraph.cli import EXIT_DAMAGED

    db = _damaged_copy(tmp_path)
    proc = _cli("threads", "show", "d-1", "--db", db, "--user", "alice")
    assert proc.returncode == EXIT_DAMAGED, proc.stderr
    line = _one_line(proc.stderr)
    assert "stored data damaged" in line and "'d-1'" in line and "version 2" in line, line
    assert "tenxgraph threads history d-1" in line and "Traceback" not in proc.stderr
    # The history still lists the readable version (the damaged one is skipped).
    proc = _cli("threads", "history", "d-1", "--db", db, "--user", "alice", "--json")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert [s["version"] for s in json.loads(proc.stdout)] == [1]
    # ... and says on stderr, in one line, which version it left out.
    warning = _one_line(proc.stderr)
    assert warning.startswith("warning: ") and "'d-1'@2" in warning, warning
    # With every version damaged the history is not "not found": exit 5.
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE checkpoints SET ranges = '[[null, null]]' WHERE thread_id = 'd-1'")
    conn.close()
    proc = _cli("threads", "history", "d-1", "--db", db, "--user", "alice")
    assert proc.returncode == EXIT_DAMAGED, proc.stdout + proc.stderr
    line = _one_line(proc.stderr)
    assert "stored data damaged" in line and "left out" in line, line
    # The exit code is documented in --help.
    assert "5  stored data damaged" in _cli("--help").stdout
