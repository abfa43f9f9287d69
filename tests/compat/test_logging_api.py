"""Structured logging as 10xGraph's logging-and-metrics page describes it: one JSON object per
line correlated to the run, thread, user and node; ``extra=`` merged; exceptions under
``exception``; secrets masked by a handler filter. Runs a real graph on every store."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
    sync_backend_fixture,
)

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END, SecretRedactionFilter, install_secret_redaction, mask_secrets
from tenxgraph.utils.logging import (
    bind_log_context_from_config,
    get_log_context,
    set_log_context,
    setup_structured_logging,
)

APP_LOGGER = "tenxgraph.compat_test_app"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Structured JSON logging of ``tenxgraph`` into a buffer; removed afterwards."""
    handler = setup_structured_logging(level=logging.INFO, json_format=True)
    buf = io.StringIO()
    handler.setStream(buf)
    try:
        yield buf
    finally:
        logging.getLogger("tenxgraph").removeHandler(handler)
        logging.getLogger("tenxgraph").setLevel(logging.NOTSET)


def records(buf: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]


def logging_graph() -> StateGraph:
    log = logging.getLogger(APP_LOGGER)

    async def charge(state: AgentState) -> str:
        log.info("Charged customer", extra={"amount_cents": 4900, "invoice": "inv_123"})
        return "charged"

    def audit(state: AgentState) -> None:  # a sync node: runs in a worker thread
        log.warning("calling the API with api_key=abcd1234secret")
        try:
            raise ValueError("token=zzzz9999 rejected")
        except ValueError:
            log.error("audit failed", exc_info=True)

    g = StateGraph()
    g.add_node("charge", charge)
    g.add_node("audit", audit)
    g.set_entry_point("charge")
    g.add_edge("charge", "audit")
    g.add_edge("audit", END)
    return g


@pytest.mark.anyio
async def test_records_are_correlated_to_the_run(backend: Backend, captured: io.StringIO) -> None:
    app = logging_graph().compile(checkpointer=backend.new())
    cfg = {"thread_id": "thread-42", "user_id": "alice"}
    await app.ainvoke({"messages": [Message.text_message("pay")]}, cfg)
    recs = [r for r in records(captured) if r["logger"] == APP_LOGGER]
    assert [r["message"] for r in recs][0] == "Charged customer"
    first = recs[0]
    assert first["level"] == "INFO" and first["timestamp"]
    assert (first["thread_id"], first["user_id"], first["node"]) == ("thread-42", "alice", "charge")
    assert first["run_id"] == cfg["run_id"]
    assert (first["amount_cents"], first["invoice"]) == (4900, "inv_123")
    warn = recs[1]
    assert warn["node"] == "audit" and warn["thread_id"] == "thread-42"
    assert "abcd1234secret" not in warn["message"] and "api_key=***" in warn["message"]
    err = recs[2]
    assert "ValueError" in err["exception"] and "zzzz9999" not in err["exception"]


def test_outside_a_run_fields_come_from_what_the_application_binds(captured: io.StringIO) -> None:
    log = logging.getLogger(APP_LOGGER)
    log.info("before binding")
    bind_log_context_from_config({"configurable": {"thread_id": "t-7"}, "user_id": "bob"})
    set_log_context(node="background_worker")
    assert get_log_context() == {"thread_id": "t-7", "user_id": "bob", "node": "background_worker"}
    log.info("after binding")
    set_log_context(thread_id=None, user_id=None, node=None)
    plain, bound = records(captured)[-2:]
    assert not {"thread_id", "user_id", "node", "run_id"} & set(plain)
    assert (bound["thread_id"], bound["user_id"], bound["node"]) == (
        "t-7",
        "bob",
        "background_worker",
    )
    with pytest.raises(TypeError):
        set_log_context(tenant="x")


def test_text_format_carries_the_same_fields() -> None:
    handler = setup_structured_logging(json_format=False, logger_name="tenxgraph.compat_text")
    buf = io.StringIO()
    handler.setStream(buf)
    try:
        set_log_context(thread_id="t-9")
        logging.getLogger("tenxgraph.compat_text").info("hello Bearer abcdefghij123")
    finally:
        set_log_context(thread_id=None)
        logging.getLogger("tenxgraph.compat_text").removeHandler(handler)
    line = buf.getvalue().strip()
    assert "[thread_id=t-9]" in line and line.endswith("hello Bearer ***")


def test_setup_twice_keeps_one_handler() -> None:
    name = "tenxgraph.compat_twice"
    setup_structured_logging(logger_name=name)
    handler = setup_structured_logging(logger_name=name)
    assert logging.getLogger(name).handlers == [handler]
    logging.getLogger(name).removeHandler(handler)


def test_mask_secrets_and_the_filter_helpers() -> None:
    text = (
        "openai sk-proj-abcdefghijklmnopqrstuvwx google AIzaSyA1234567890abcdefghijklmnopqrstu "
        "github ghp_abcdefghijklmnopqrstuvwxyz0123456789 slack xoxb-1234567890-abcdef "
        "aws AKIAABCDEFGHIJKLMNOP dsn postgresql://app:hunter2@db/prod "
        "signed https://b.s3.amazonaws.com/k?X-Amz-Signature=deadbeef&X-Amz-Date=1"
    )
    masked = mask_secrets(text)
    for secret in ("sk-proj-abc", "AIzaSy", "ghp_", "xoxb-", "AKIAABCD", "hunter2", "deadbeef"):
        assert secret not in masked
    assert "X-Amz-Date=1" in masked and "postgresql://app:***@db/prod" in masked
    assert mask_secrets("nothing to hide here") == "nothing to hide here"

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    logger = logging.getLogger("tenxgraph.compat_install")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        filt = install_secret_redaction("tenxgraph.compat_install")
        assert isinstance(filt, SecretRedactionFilter) and filt in handler.filters
        logger.info("password=%s", "opensesame")
    finally:
        logger.removeHandler(handler)
        logging.getLogger().removeFilter(filt)
        for h in logging.getLogger().handlers:
            h.removeFilter(filt)
    assert buf.getvalue().strip() == "password=***"
