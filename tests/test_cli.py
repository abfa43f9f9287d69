"""The ``tenxgraph`` command: demo, threads, setup, replay (SQLite, and Postgres + Redis with
SIGKILLed workers), help and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tenxgraph.cli import EXIT_MISMATCH, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, main
from tenxgraph.models.replay import bundled_data_path, load_trajectories

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tenxgraph.cli", *args],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def _small_data(tmp_path: Path, n: int) -> Path:
    """The ``n`` shortest bundled conversations that call tools, both sources, in one file."""
    trajs = sorted(load_trajectories(), key=lambda t: (len(t.messages), t.id))
    picked = [t for t in trajs if t.source.startswith("tau2") and t.tool_call_count][: n // 2]
    picked += [t for t in trajs if t.source.startswith("tau-bench") and t.tool_call_count][
        : n - len(picked)
    ]
    ids = {t.id for t in picked}
    lines = []
    for f in sorted(bundled_data_path().glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip() and json.loads(line)["id"] in ids:
                lines.append(line)
    out = tmp_path / "small.jsonl"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


# -- help and usage -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["setup"],
        ["threads"],
        ["threads", "list"],
        ["threads", "show"],
        ["threads", "history"],
        ["threads", "delete"],
        ["threads", "rewind"],
        ["threads", "fork"],
        ["demo"],
        ["replay"],
    ],
)
def test_every_command_has_help(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    assert "usage: tenxgraph" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["replay", "--workers", "two"])
    assert exc.value.code == EXIT_USAGE
    assert main(["replay", "--workers", "0", "--quiet"]) == EXIT_USAGE
    assert main(["replay", str(tmp_path / "missing.jsonl"), "--quiet"]) == EXIT_USAGE
    with pytest.raises(SystemExit) as exc:
        main([])  # no command: one line on stderr, like every usage error
    assert exc.value.code == EXIT_USAGE


def test_unreachable_store_exits_3(capsys):
    code = main(["setup", "--dsn", "postgresql://nobody:secret@127.0.0.1:1/none", "--timeout", "1"])
    assert code == EXIT_UNREACHABLE
    err = capsys.readouterr().err
    assert "secret" not in err


# -- demo -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_demo_runs_and_exits_0(tmp_path):
    proc = _cli("demo", "--db", str(tmp_path / "demo.sqlite"))
    assert proc.returncode == EXIT_OK, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert (
        "SIGKILL" in out
        and "Resume" in out
        and "3/3 threads hold exactly the recorded messages" in out
    )
    assert "double executions: 0" in out


# -- threads --------------------------------------------------------------------------------------
def test_threads_list_show_history_delete_respect_the_user(tmp_path, capsys):
    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import Message
    from tenxgraph.storage.checkpointer import SqliteCheckpointer
    from tenxgraph.utils import END

    db = str(tmp_path / "ops.sqlite")
    cp = SqliteCheckpointer(db)
    g = StateGraph()
    g.add_node("MAIN", lambda state: "hello " + state.context[-1].text())
    g.add_edge("MAIN", END)
    g.set_entry_point("MAIN")
    app = g.compile(checkpointer=cp)
    for tid, user in (("a-1", "alice"), ("a-2", "alice"), ("b-1", "bob")):
        for text in ("one", "two"):
            app.invoke(
                {"messages": [Message.text_message(text)]}, {"thread_id": tid, "user_id": user}
            )
    cp.close()
    capsys.readouterr()

    assert main(["threads", "list", "--db", db, "--user", "alice"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "a-1" in out and "a-2" in out and "b-1" not in out

    assert main(["threads", "list", "--db", db, "--user", "alice", "--json"]) == EXIT_OK
    listed = json.loads(capsys.readouterr().out)
    assert {t["thread_id"] for t in listed} == {"a-1", "a-2"}
    assert all(t["version"] == 2 for t in listed)

    assert main(["threads", "show", "a-1", "--db", db, "--user", "alice"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "hello two" in out and "version 2" in out
    # another user's thread reads as missing
    assert main(["threads", "show", "a-1", "--db", db, "--user", "bob"]) == EXIT_MISMATCH
    assert "not found" in capsys.readouterr().err

    assert main(["threads", "history", "a-1", "--db", db, "--user", "alice"]) == EXIT_OK
    lines = [x for x in capsys.readouterr().out.splitlines()[1:] if x.strip()]
    assert [int(x.split()[0]) for x in lines] == [2, 1]

    assert (
        main(["threads", "delete", "a-1", "--db", db, "--user", "alice"]) == EXIT_USAGE
    )  # no --yes
    assert main(["threads", "delete", "a-1", "--db", db, "--user", "bob", "--yes"]) == EXIT_MISMATCH
    assert main(["threads", "delete", "a-1", "--db", db, "--user", "alice", "--yes"]) == EXIT_OK
    capsys.readouterr()
    assert main(["threads", "list", "--db", db, "--user", "alice", "--json"]) == EXIT_OK
    assert {t["thread_id"] for t in json.loads(capsys.readouterr().out)} == {"a-2"}


def test_threads_rewind_and_fork(tmp_path, capsys):
    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import Message
    from tenxgraph.storage.checkpointer import SqliteCheckpointer
    from tenxgraph.utils import END

    db = str(tmp_path / "travel.sqlite")
    g = StateGraph()
    g.add_node("MAIN", lambda state: "hello " + state.context[-1].text())
    g.add_edge("MAIN", END)
    g.set_entry_point("MAIN")
    app = g.compile(checkpointer=SqliteCheckpointer(db))
    for text in ("one", "two", "three"):
        app.invoke({"messages": [Message.text_message(text)]}, {"thread_id": "t", "user_id": "al"})
    app.close()
    capsys.readouterr()
    base = ["--db", db, "--user", "al"]
    assert main(["threads", "rewind", "t", "--version", "1", *base]) == EXIT_USAGE  # no --yes
    assert main(["threads", "rewind", "t", "--version", "1", *base, "--yes"]) == EXIT_OK
    assert "version 4 written, equal to version 1" in capsys.readouterr().out
    assert main(["threads", "rewind", "t", "--version", "9", *base, "--yes"]) == EXIT_MISMATCH
    assert "its versions run from 1 to 4" in capsys.readouterr().err
    argv = ["threads", "fork", "t", "--version", "2", "--to", "t2", *base, "--yes", "--json"]
    assert main(argv) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["forked_from"] == {"thread_id": "t", "version": 2} and out["messages"] == 4
    assert main(argv) == EXIT_MISMATCH  # the target exists
    assert "already exists (version 1)" in capsys.readouterr().err
    into_self = ["threads", "fork", "t", "--version", "2", "--to", "t", *base, "--yes"]
    assert main(into_self) == EXIT_USAGE
    assert "into itself" in capsys.readouterr().err
    for action in (["rewind"], ["fork", "--to", "t9"]):  # beyond a 64-bit version: usage
        with pytest.raises(SystemExit) as big:
            main(["threads", *action, "t", "--version", str(2**63), *base, "--yes"])
        assert big.value.code == EXIT_USAGE
        assert "at most 9223372036854775807" in capsys.readouterr().err
    bob = ["threads", "fork", "t", "--version", "2", "--to", "t3", "--db", db, "--yes"]
    assert main([*bob, "--user", "bob"]) == EXIT_MISMATCH  # another user's thread is missing
    rewind_bob = ["threads", "rewind", "t", "--version", "1", "--db", db, "--yes", "--user", "bob"]
    assert main(rewind_bob) == EXIT_MISMATCH
    assert "not found" in capsys.readouterr().err
    assert main(["threads", "history", "t", *base]) == EXIT_OK
    out = capsys.readouterr().out
    assert "(rewind to v1)" in out.splitlines()[1]
    assert main(["threads", "history", "t2", *base, "--json"]) == EXIT_OK
    hist = json.loads(capsys.readouterr().out)
    assert hist[0]["origin"] == {"op": "fork", "thread_id": "t", "version": 2}


def test_setup_on_sqlite(tmp_path, capsys):
    assert main(["setup", "--db", str(tmp_path / "s.sqlite")]) == EXIT_OK
    assert "schema ready" in capsys.readouterr().out


# -- replay ---------------------------------------------------------------------------------------
def _summary_value(out: str, label: str) -> str:
    line = next(x for x in out.splitlines() if x.startswith(label))
    return line[len(label) :].strip()


@pytest.mark.slow
def test_replay_on_sqlite_with_two_workers(tmp_path):
    data = _small_data(tmp_path, 4)
    proc = _cli(
        "replay",
        str(data),
        "--workers",
        "2",
        "--db",
        str(tmp_path / "r.sqlite"),
        "--quiet",
        timeout=240,
    )
    assert proc.returncode == EXIT_OK, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _summary_value(proc.stdout, "verified threads").startswith("4/4  OK")
    assert "double executions: 0" in proc.stdout


def test_replay_defaults_to_the_bundled_recordings_outside_a_clone(tmp_path):
    # no data argument, run from a folder that holds no tenxgraph/data: the recordings that
    # ship in the package are used
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tenxgraph.cli",
            "replay",
            "--limit",
            "2",
            "--workers",
            "1",
            "--db",
            str(tmp_path / "r.sqlite"),
            "--quiet",
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert proc.returncode == EXIT_OK, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _summary_value(proc.stdout, "verified threads").startswith("2/2  OK")


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize("topology", ["direct", "pgbouncer", "partitioned", "redis-cluster"])
def test_replay_on_postgres_and_redis_with_kills(tmp_path, request, pg_dsn, pg_schema, topology):
    """A replay with SIGKILLed workers verifies every thread on each deployment topology
    (docs/deployment.md): direct, through PgBouncer in transaction mode, on the
    hash-partitioned layout, and with a Redis Cluster as the shared cache."""
    dsn = request.getfixturevalue("pgbouncer_dsn") if topology == "pgbouncer" else pg_dsn
    if topology == "redis-cluster":
        redis_args = [
            "--redis-url",
            request.getfixturevalue("redis_cluster_url"),
            "--redis-prefix",
            request.getfixturevalue("redis_cluster_prefix"),
            "--redis-cluster",
        ]
    else:
        redis_args = [
            "--redis-url",
            request.getfixturevalue("redis_url"),
            "--redis-prefix",
            request.getfixturevalue("redis_prefix"),
        ]
    extra = ["--partitions", "4"] if topology == "partitioned" else []
    data = _small_data(tmp_path, 8)
    proc = _cli(
        "replay",
        str(data),
        "--workers",
        "4",
        "--kill-rate",
        "0.15",
        "--seed",
        "3",
        "--dsn",
        dsn,
        "--schema",
        pg_schema,
        *redis_args,
        *extra,
        "--quiet",
        timeout=240,
    )
    assert proc.returncode == EXIT_OK, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert _summary_value(proc.stdout, "verified threads").startswith("8/8  OK")
    assert "double executions: 0" in proc.stdout
    if topology == "partitioned":
        with psycopg.connect(pg_dsn) as conn:
            kind, parts = conn.execute(
                "SELECT c.relkind, (SELECT count(*) FROM pg_inherits WHERE inhparent = c.oid)"
                " FROM pg_class c WHERE c.oid = to_regclass(%s)",
                (f'"{pg_schema}".tenxgraph_threads',),
            ).fetchone()
        assert (kind, parts) == ("p", 4)
