"""Module-scoped server addresses for the load-balancer tests whose servers are started once per
module; each module's own schema and Redis prefix come from ``pg_schema_module`` and
``redis_prefix_module`` in tests/conftest.py."""

from __future__ import annotations

import pytest

from tests.conftest import PG_DSN, REDIS_URL


@pytest.fixture(scope="module")
def pg_dsn_module() -> str:
    """DSN of the test database."""
    return PG_DSN


@pytest.fixture(scope="module")
def redis_url_module() -> str:
    """URL of the test Redis server."""
    return REDIS_URL
