"""Connection-time failures against real servers: permanent ones (unknown role or database,
wrong password, unresolvable host, impossible TLS) raise ``StorageConnectionError`` on the first
attempt, well under 2 s, from ``setup()`` and from the async API alike; transient ones (refused,
too many clients) are retried within the pool timeout with one log line per attempt."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from _private_pg import PrivateCluster, private_cluster

from tenxgraph.core.exceptions import (
    ConfigError,
    StorageConnectionError,
    TransientStorageError,
)
from tenxgraph.storage._pg_connect import classify
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.storage.postgres import PostgresStore

pytestmark = pytest.mark.postgres

FAST_S = 2.0  # a permanent failure must be reported well before a pool timeout


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    with private_cluster(max_connections=4) as c:
        yield c


def _both_paths(dsn: str, **kw: object) -> list[tuple[BaseException, float]]:
    """The error and elapsed seconds of ``setup()`` and of a first async read."""
    out: list[tuple[BaseException, float]] = []
    cp = PgCheckpointer(dsn, pool_config={"timeout": 10, **kw})
    t0 = time.monotonic()
    with pytest.raises(Exception) as sync_err:
        cp.setup()
    out.append((sync_err.value, time.monotonic() - t0))

    async def read() -> None:
        t1 = time.monotonic()
        try:
            await cp.aget_state({"thread_id": "t1"})
        except Exception as exc:  # noqa: BLE001 - inspected below
            out.append((exc, time.monotonic() - t1))
        finally:
            await cp.aclose()

    asyncio.run(read())
    assert len(out) == 2
    return out


@pytest.mark.parametrize(
    ("dsn", "reason", "named"),
    [
        ("postgresql://no_such_role_x@127.0.0.1:5432/test", "role", "no_such_role_x"),
        ("host=127.0.0.1 user=postgres dbname=no_such_db_x", "database", "no_such_db_x"),
        ("postgresql://postgres@no-such-host.invalid:5432/test", "host", "no-such-host.invalid"),
        ("host=127.0.0.1 user=postgres dbname=test sslmode=require", "tls", "127.0.0.1"),
    ],
)
def test_permanent_failures_raise_at_once(dsn: str, reason: str, named: str) -> None:
    for err, elapsed in _both_paths(dsn):
        assert isinstance(err, StorageConnectionError), err
        assert not isinstance(err, TransientStorageError)
        assert err.error_code == "STORAGE_CONNECT_001"
        assert err.context["reason"] == reason
        assert named in str(err)
        assert elapsed < FAST_S, elapsed


def test_wrong_password_is_permanent_and_never_shown(cluster: PrivateCluster) -> None:
    wrong = "Wrong secret 42"
    for dsn in (
        cluster.kv_dsn(wrong),
        f"postgresql://postgres:Wrong%20secret%2042@127.0.0.1:{cluster.port}/test",
    ):
        for err, elapsed in _both_paths(dsn):
            assert isinstance(err, StorageConnectionError), err
            assert err.context["reason"] == "password"
            assert "'postgres'" in str(err)  # the role is named
            assert "Wrong" not in str(err) and "secret" not in str(err)
            assert "%20" not in str(err)
            assert elapsed < FAST_S, elapsed


def test_right_password_with_spaces_and_at_sign_connects(cluster: PrivateCluster) -> None:
    cp = PgCheckpointer(cluster.kv_dsn(), schema="t_pw")
    cp.setup()
    assert cp.get_state({"thread_id": "nothing-here"}) is None
    cp.close()


def test_refused_is_retried_with_one_log_line_per_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    dsn = "postgresql://postgres@127.0.0.1:9/test"  # port 9 (discard): refused on loopback
    for err, elapsed in _both_paths(dsn, timeout=1.5, min_size=4):
        assert isinstance(err, TransientStorageError), err
        assert err.context["reason"] == "refused"
        assert 1.0 <= elapsed < 5.0, elapsed
    lines = [r for r in caplog.records if "not reachable" in r.getMessage()]
    attempts = [r.getMessage().split("(attempt ")[1].split(",")[0] for r in lines]
    # two calls (setup, then the async read), each numbering its own attempts 1, 2, 3 ...:
    # one line per attempt, not one per pool worker
    starts = [i for i, a in enumerate(attempts) if a == "1"]
    assert len(starts) == 2, attempts
    for run in (attempts[: starts[1]], attempts[starts[1] :]):
        assert run == [str(i) for i in range(1, len(run) + 1)]
    assert not [r for r in caplog.records if r.name.startswith("psycopg")]


def test_too_many_clients_is_transient_and_retried(cluster: PrivateCluster) -> None:
    hogs = [psycopg.connect(cluster.kv_dsn()) for _ in range(cluster.max_connections)]
    try:
        with pytest.raises(psycopg.OperationalError) as info:
            psycopg.connect(cluster.kv_dsn())
        assert classify(info.value).reason == "too_many_clients"
        assert not classify(info.value).permanent
        # a slot frees up while the store retries: setup() succeeds within its timeout
        timer = threading.Timer(0.8, hogs.pop().close)
        timer.start()
        cp = PgCheckpointer(cluster.kv_dsn(), schema="t_busy", pool_config={"timeout": 10})
        t0 = time.monotonic()
        try:
            cp.setup()
            assert 0.5 < time.monotonic() - t0 < 10
        finally:
            cp.close()
            timer.join()
    finally:
        for conn in hogs:
            conn.close()


@pytest.mark.parametrize(
    ("sqlstate", "permanent", "reason"),
    [
        ("28P01", True, "password"),
        ("28000", True, "permission"),
        ("3D000", True, "database"),
        ("53300", False, "too_many_clients"),
        ("57P03", False, "starting_up"),
        ("08006", False, "unavailable"),
    ],
)
def test_classify_by_sqlstate(sqlstate: str, permanent: bool, reason: str) -> None:
    exc = psycopg.errors.lookup(sqlstate)("server says no")
    failure = classify(exc)
    assert (failure.permanent, failure.reason, failure.sqlstate) == (permanent, reason, sqlstate)


def test_unencoded_at_in_a_url_password_is_refused_before_connecting() -> None:
    with pytest.raises(ConfigError) as info:
        PostgresStore("postgresql://bob:Pa@ss-word@127.0.0.1:5432/test")
    assert "%40" in str(info.value)
    assert "ss-word" not in str(info.value) and "Pa@" not in str(info.value)


def test_failing_setups_never_show_a_password(
    cluster: PrivateCluster, pg_schema: str, redis_prefix: str
) -> None:
    """Every exception text, log record, span and CLI output of 27 failing setups (URL and
    key/value DSNs, quoted passwords with spaces, unencoded '@', '/', '?' and spaces in URL
    passwords, unquoted and double-quoted spaces and backslash escapes in key/value passwords,
    SQLAlchemy URLs, query passwords, wrong passwords, TLS, Redis URLs, an application pool)
    holds no password."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from _private_pg import _free_port

    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parents[1]), str(here)])}
    proc = subprocess.run(
        [
            sys.executable,
            str(here / "_failing_setups.py"),
            str(cluster.port),
            str(_free_port()),
            pg_schema,
            redis_prefix,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    assert len(results) == 27
    leaks = []
    for n, case in enumerate(results, 1):
        blob = "\n".join(case["seen"] + case["logs"] + case["spans"])
        # not vacuous: each setup produced errors or CLI output to look at
        assert any("exit " in s for s in case["seen"]), n
        leaks += [(n, s) for s in case["secrets"] if s in blob]
    assert leaks == []
    assert proc.stderr.count("Wrong-pw-10") == 0 and proc.stderr.count("Pool pw 20") == 0


def test_cli_wrong_password_exits_4(
    cluster: PrivateCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    from tenxgraph.cli import EXIT_PERMISSION, main

    for argv in (["setup"], ["threads", "list"]):
        assert main([*argv, "--dsn", cluster.kv_dsn("Not it 99")]) == EXIT_PERMISSION
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "password" in err and "Not it 99" not in err


def test_password_changed_while_the_pool_is_open_is_reported_as_permanent(
    cluster: PrivateCluster,
) -> None:
    """The pool connected fine; then the role's password changes and its sessions end. After
    the pool's timeout the error says the password is rejected, not "raise max_size"."""
    role, old_pw, new_pw = "rotating", "Old-pw-rot-1", "New-pw-rot-2"
    admin = cluster.kv_dsn()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD '{old_pw}'")
    dsn = f"host=127.0.0.1 port={cluster.port} user={role} dbname=test password='{old_pw}'"
    cp = PgCheckpointer(dsn, schema="t_rot", pool_config={"timeout": 2, "max_size": 2})
    try:
        cp.setup()
        assert cp.get_state({"thread_id": "t"}) is None
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"ALTER ROLE {role} PASSWORD '{new_pw}'")
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
        with pytest.raises(StorageConnectionError) as info:
            cp.get_state({"thread_id": "t2"})
        assert info.value.context["reason"] == "password"
        assert old_pw not in str(info.value)
    finally:
        cp.close()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS t_rot CASCADE")


# -- DSNs whose password cannot be told apart: refused up front, never quoted -----------------------
@pytest.mark.parametrize(
    ("dsn", "char", "fragments"),
    [
        ("postgresql://rv3:ab/cdXYZ@127.0.0.1:{port}/rvdb", "%2F", ["ab/cd", "cdXYZ"]),
        ("postgresql://postgres:ab?cdXYZ@127.0.0.1:{port}/test", "%3F", ["ab?cd", "cdXYZ"]),
        ("postgresql://postgres:two wordsXY@127.0.0.1:{port}/test", "%20", ["two", "wordsXY"]),
        ("postgresql://bob:Pa@ss-word@127.0.0.1:{port}/test", "%40", ["ss-word", "Pa@"]),
    ],
)
def test_ambiguous_url_passwords_are_refused_before_connecting(
    cluster: PrivateCluster, dsn: str, char: str, fragments: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from tenxgraph.cli import EXIT_USAGE, main

    dsn = dsn.format(port=cluster.port)
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as info:
        PgCheckpointer(dsn, pool_config={"timeout": 30})
    assert time.monotonic() - t0 < FAST_S
    shown = str(info.value) + repr(info.value)
    assert info.value.error_code == "CONFIG_001" and char in shown
    assert not [f for f in fragments if f in shown]
    for argv in (["setup"], ["threads", "list"]):
        assert main([*argv, "--dsn", dsn, "--timeout", "30"]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and char in err, err
        assert not [f for f in fragments if f in err], err


@pytest.mark.parametrize(
    ("dsn", "fragments"),
    [
        ("host=127.0.0.1 port={port} user=postgres password=Secret1 Secret2word",
         ["Secret1", "Secret2word"]),
        ('host=127.0.0.1 port={port} user=postgres password="dq wordXY"', ["wordXY"]),
        ("host=127.0.0.1 port={port} user=postgres password='open Quoted-pw", ["Quoted-pw"]),
    ],
)  # fmt: skip
def test_unparsable_dsns_never_echo_the_driver_message(
    cluster: PrivateCluster, dsn: str, fragments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from tenxgraph.cli import EXIT_USAGE, main

    dsn = dsn.format(port=cluster.port)
    with pytest.raises(psycopg.ProgrammingError) as raw:
        psycopg.connect(dsn)  # the driver's own message quotes part of the password
    assert [f for f in fragments if f in str(raw.value)] or "unterminated" in str(raw.value)
    with pytest.raises(ConfigError) as info:
        PostgresStore(dsn)
    shown = str(info.value) + repr(info.value)
    assert "cannot parse the Postgres DSN" in shown
    assert not [f for f in fragments if f in shown], shown
    assert main(["setup", "--dsn", dsn]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and not [f for f in fragments if f in err], err


def test_backslash_escaped_space_in_a_wrong_password_is_never_shown(
    cluster: PrivateCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    dsn = f"host=127.0.0.1 port={cluster.port} user=postgres dbname=test password=abc\\ defXY"
    for err, elapsed in _both_paths(dsn):
        assert isinstance(err, StorageConnectionError) and err.context["reason"] == "password"
        assert "defXY" not in str(err) + repr(err), err
        assert elapsed < FAST_S
    store = PostgresStore(dsn)
    assert "defXY" not in repr(store) + str(store._attrs)
    assert not [r for r in caplog.records if "defXY" in r.getMessage()]


def test_pg_hba_reject_line_is_permanent_permission(
    cluster: PrivateCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    from tenxgraph.cli import EXIT_PERMISSION, main

    admin = cluster.kv_dsn()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS shunned")
        conn.execute("CREATE ROLE shunned LOGIN PASSWORD 'Shunned-pw-1'")
    cluster.prepend_hba("host all shunned 127.0.0.1/32 reject")
    dsn = f"host=127.0.0.1 port={cluster.port} user=shunned dbname=test password=Shunned-pw-1"
    with pytest.raises(psycopg.OperationalError) as raw:
        psycopg.connect(dsn)
    assert "pg_hba.conf rejects connection" in str(raw.value)
    assert classify(raw.value).permanent and classify(raw.value).reason == "permission"
    for err, elapsed in _both_paths(dsn):
        assert isinstance(err, StorageConnectionError), err
        assert err.context["reason"] == "permission"
        assert "Shunned-pw-1" not in str(err)
        assert elapsed < FAST_S, elapsed
    t0 = time.monotonic()
    assert main(["setup", "--dsn", dsn, "--timeout", "30"]) == EXIT_PERMISSION
    assert time.monotonic() - t0 < FAST_S
    err_line = capsys.readouterr().err
    assert len(err_line.strip().splitlines()) == 1 and "pg_hba.conf" in err_line
