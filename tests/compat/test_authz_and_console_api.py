"""``tenxgraph.core.authz`` (the config's authorization block) and ``ConsolePublisher``."""

from __future__ import annotations

import io
import json
import logging

import pytest

from tenxgraph.core import authz
from tenxgraph.core.exceptions import ConfigError
from tenxgraph.runtime.publisher import ConsolePublisher
from tenxgraph.runtime.publisher.events import Event, EventModel, EventType


def test_block_has_three_keys_and_unknown_scope_grants_no_isolation() -> None:
    block = authz.build_authz("ann", scope="owner", scopes=(authz.GRAPH_INVOKE,))
    assert block == {"user_id": "ann", "scope": "owner", "scopes": ["graph:invoke"]}
    assert authz.build_authz("ann", scope="everyone")["scope"] == authz.SCOPE_NONE


def test_server_block_under_user_beats_a_block_the_client_added() -> None:
    server = authz.build_authz("ann", scope=authz.SCOPE_OWNER, scopes=[authz.STORE_READ])
    client = authz.build_authz("ann", scope=authz.SCOPE_NONE, scopes=["*"])
    cfg = {"user": {"user_id": "ann", "authz": server}, "authz": client}
    assert authz.get_authz(cfg) == server
    assert authz.isolation_scope(cfg) == "owner"
    assert not authz.has_scope(cfg, authz.GRAPH_INVOKE)
    assert authz.has_scope(cfg, authz.STORE_READ)


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        ({}, True),  # no block: direct library use
        ({"authz": {"scopes": None}}, True),
        ({"authz": {"scopes": []}}, False),  # an empty list denies everything
        ({"authz": {"scopes": ["*"]}}, True),
        ({"authz": {"scopes": "graph:invoke"}}, False),  # malformed: not a list
    ],
)
def test_has_scope_cases(cfg: dict[str, object], expected: bool) -> None:
    assert authz.has_scope(cfg, authz.GRAPH_INVOKE) is expected


def test_malformed_configs_have_no_block() -> None:
    assert authz.get_authz(None) is None
    assert authz.get_authz({"authz": ["owner"]}) is None
    assert authz.isolation_scope({"authz": {"scope": "all"}}) is None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _event() -> EventModel:
    return EventModel(event=Event.NODE_EXECUTION, event_type=EventType.START, node_name="n1")


@pytest.mark.anyio
async def test_console_writes_one_json_line_per_event() -> None:
    out = io.StringIO()
    async with ConsolePublisher(stream=out) as pub:
        await pub.publish(_event())
        await pub.publish(_event())
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0])["node_name"] == "n1"
    assert pub.is_closed
    with pytest.raises(RuntimeError):
        await pub.publish(_event())


@pytest.mark.anyio
async def test_console_text_format_and_logger(caplog: pytest.LogCaptureFixture) -> None:
    out = io.StringIO()
    await ConsolePublisher({"format": "text"}, stream=out).publish(_event())
    assert out.getvalue().rstrip().endswith("n1 None")
    with caplog.at_level(logging.INFO, logger="tenxgraph.publisher"):
        await ConsolePublisher({"use_logger": True}, stream=out).publish(_event())
    assert any("n1" in r.getMessage() for r in caplog.records)
    assert out.getvalue().count("\n") == 1


def test_console_rejects_unknown_format() -> None:
    with pytest.raises(ConfigError) as err:
        ConsolePublisher({"format": "xml"})
    assert err.value.error_code == "PUBLISHER_CONFIG"
