"""Fixtures of the server tests: a Postgres schema shared by a module's server processes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import PG_DSN


@pytest.fixture(scope="module")
def module_schema() -> Iterator[str]:
    """A fresh Postgres schema for one test module (dropped with CASCADE afterwards)."""
    import psycopg

    name = "srv_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
