"""Fixtures of the recovery tests: the store each test runs on (``RECOVERY_STORE`` spec)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "pg", "pgredis"])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store of each kind, as a ``RECOVERY_STORE`` value."""
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'runs.sqlite'}"
        return
    schema = request.getfixturevalue("pg_schema")
    dsn = request.getfixturevalue("pg_dsn")
    if request.param == "pg":
        yield f"pg:{dsn}|{schema}"
        return
    url = request.getfixturevalue("redis_url")
    prefix = request.getfixturevalue("redis_prefix")
    yield f"pgredis:{dsn}|{schema}|{url}|{prefix}"
