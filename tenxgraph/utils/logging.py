"""Structured logging with run correlation and secret redaction (10xGraph's
``utils.logging``).

tenxgraph never configures logging by itself. An application opts in once at startup::

    handler = setup_structured_logging(level=logging.INFO, json_format=True)

Every record then carries the correlation fields ``run_id``, ``thread_id``, ``user_id`` and
``node`` when they are known: inside a node or a tool they come from the run being executed;
elsewhere from what the application bound with ``bind_log_context_from_config`` or
``set_log_context`` (which take precedence). The fields live in context variables, so
concurrent runs never see each other's.

Secret redaction is a heuristic safety net (see ``mask_secrets``): it masks common API-key
formats, bearer tokens, ``key=value`` secrets, passwords in URLs and DSNs, and credential query
parameters of signed URLs. It can miss novel formats and can over-mask; keep credentials out of
log messages in the first place.
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
from collections.abc import Mapping
from typing import Any

import orjson

from tenxgraph.core.exceptions import redact

__all__ = [
    "CORRELATION_FIELDS",
    "CorrelationFilter",
    "SecretRedactionFilter",
    "bind_log_context_from_config",
    "get_log_context",
    "install_secret_redaction",
    "mask_secrets",
    "set_log_context",
    "setup_structured_logging",
]

#: The fields stamped on every record when known, in this order.
CORRELATION_FIELDS: tuple[str, ...] = ("run_id", "thread_id", "user_id", "node")

_BOUND: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "tenxgraph_log_context", default=None
)

_MASK = "***"

#: Patterns of secrets, each replaced by ``_MASK`` (groups ``pre`` / ``post`` are kept).
_SECRET_PATTERNS: tuple[re.Pattern[str], ...] = (
    # OpenAI (sk-..., sk-proj-...), Anthropic-style sk-ant-...
    re.compile(r"(?P<pre>)\bsk-[A-Za-z0-9_\-]{16,}(?P<post>)"),
    # Google API keys
    re.compile(r"(?P<pre>)\bAIza[0-9A-Za-z_\-]{30,}(?P<post>)"),
    # GitHub tokens (classic and fine-grained)
    re.compile(r"(?P<pre>)\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,})(?P<post>)"),
    # Slack tokens
    re.compile(r"(?P<pre>)\bxox[abprs]-[A-Za-z0-9\-]{10,}(?P<post>)"),
    # AWS access key ids
    re.compile(r"(?P<pre>)\b(?:AKIA|ASIA)[0-9A-Z]{16}\b(?P<post>)"),
    # Authorization: Bearer <token>
    re.compile(r"(?P<pre>\bBearer\s+)[A-Za-z0-9._~+/=\-]{8,}(?P<post>)", re.I),
    # Credential query parameters of signed URLs (S3, GCS, Azure SAS)
    re.compile(
        r"(?P<pre>[?&](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|X-Goog-Signature"
        r"|X-Goog-Credential|sig|signature|token|access_token)=)[^&\s\"']+(?P<post>)",
        re.I,
    ),
    # key=value / key: value secrets
    re.compile(
        r"(?P<pre>\b(?:api[_-]?key|apikey|secret|client[_-]?secret|password|passwd|pwd|token"
        r"|access[_-]?token|refresh[_-]?token|auth[_-]?token)[\"']?\s*[=:]\s*[\"']?)"
        r"[^\s\"',;&]{4,}(?P<post>)",
        re.I,
    ),
)


def mask_secrets(text: object) -> str:
    """Return ``str(text)`` with likely secrets replaced by ``***``.

    Masks OpenAI, Google, GitHub, Slack and AWS key formats, ``Bearer`` tokens, ``key=value``
    secrets (``api_key``, ``secret``, ``password``, ``token`` ...), passwords in URLs and
    DSNs, and credential query parameters of signed URLs. A heuristic: it may miss novel
    formats and may over-mask.

    Args:
        text: any object; its ``str()`` is masked.

    Returns:
        The masked text.
    """
    out = redact(text)
    for pattern in _SECRET_PATTERNS:
        out = pattern.sub(lambda m: f"{m.group('pre')}{_MASK}{m.group('post')}", out)
    return out


class SecretRedactionFilter(logging.Filter):
    """A logging filter that masks secrets in a record's message (see ``mask_secrets``) and
    in the traceback of ``exc_info`` (formatted here, so every formatter reuses the masked
    text).

    Attach it to a **handler**: a filter on a logger only sees records logged on that very
    logger, not those of its children, while a handler's filters see every record it emits.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the record in place; always lets it through."""
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record: leave it to the handler
            return True
        masked = mask_secrets(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            # Formatters reuse exc_text when set: format the traceback once here, masked.
            record.exc_text = _PLAIN.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_secrets(record.exc_text)
        return True


_PLAIN = logging.Formatter()


def install_secret_redaction(logger_name: str | None = "tenxgraph") -> SecretRedactionFilter:
    """Attach one ``SecretRedactionFilter`` to every handler that emits the records of
    ``logger_name``: its own handlers and, while it propagates, those of its ancestors (the
    root logger's included). When there is no handler at all yet, the filter goes on the
    logger itself.

    Args:
        logger_name: the logger whose records must be masked (``None``: the root logger).

    Returns:
        The filter (already attached).
    """
    filt = SecretRedactionFilter()
    logger: logging.Logger | None = logging.getLogger(logger_name)
    attached = False
    while logger is not None:
        for handler in logger.handlers:
            if filt not in handler.filters:
                handler.addFilter(filt)
                attached = True
        if not logger.propagate:
            break
        logger = logger.parent
    if not attached:
        logging.getLogger(logger_name).addFilter(filt)
    return filt


def set_log_context(**fields: Any) -> None:
    """Bind correlation fields for the current context (task or thread); ``None`` unbinds.

    Args:
        **fields: any of ``run_id``, ``thread_id``, ``user_id``, ``node`` (values become str).

    Raises:
        TypeError: a field name that is not one of the correlation fields.
    """
    unknown = sorted(set(fields) - set(CORRELATION_FIELDS))
    if unknown:
        raise TypeError(
            f"set_log_context() takes {', '.join(CORRELATION_FIELDS)}; got {', '.join(unknown)}"
        )
    bound = dict(_BOUND.get() or {})
    for name, value in fields.items():
        if value is None:
            bound.pop(name, None)
        else:
            bound[name] = str(value)
    _BOUND.set(bound)


def bind_log_context_from_config(config: Mapping[str, Any] | None) -> None:
    """Bind ``run_id``, ``thread_id`` and ``user_id`` from a run config (top level, or
    LangGraph's ``configurable`` sub-dict); keys that are absent are left as they were."""
    if not config:
        return
    sub = config.get("configurable")
    merged = {**(sub if isinstance(sub, Mapping) else {}), **config}
    set_log_context(
        **{k: merged[k] for k in ("run_id", "thread_id", "user_id") if merged.get(k) is not None}
    )


def get_log_context() -> dict[str, str]:
    """The correlation fields known here: those of the run executing on this task (inside a
    node or a tool), overridden by those bound with ``set_log_context``.

    Returns:
        ``{field: str}`` for the known fields only.
    """
    from tenxgraph.core._context import current_run

    out: dict[str, str] = {}
    run = current_run()
    if run is not None:
        cfg = run.config
        if cfg.get("run_id"):
            out["run_id"] = str(cfg["run_id"])
        out["thread_id"] = str(run.key.thread_id)
        if cfg.get("user_id") is not None:
            out["user_id"] = str(cfg["user_id"])
        if run.node:
            out["node"] = run.node
    out.update(_BOUND.get() or {})
    return out


class CorrelationFilter(logging.Filter):
    """Stamp the known correlation fields (``get_log_context``) on each record as
    attributes, so every formatter, handler or APM agent downstream sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Add the fields; always lets the record through."""
        for name, value in get_log_context().items():
            setattr(record, name, value)
        return True


#: Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "taskName",
    *CORRELATION_FIELDS,
}


class _JsonFormatter(logging.Formatter):
    """One JSON object per line: timestamp, level, logger, message, the correlation fields
    present, ``extra=`` values, and ``exception`` when ``exc_info`` was given."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "timestamp": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CORRELATION_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                data[name] = value
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                data[key] = value
        if record.exc_info:
            record.exc_text = record.exc_text or self.formatException(record.exc_info)
        if record.exc_text:
            data["exception"] = record.exc_text
        return orjson.dumps(data, default=str).decode()


class _TextFormatter(logging.Formatter):
    """``asctime level logger [run_id=... thread_id=... user_id=... node=...] message``."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(
            f"{name}={getattr(record, name)}"
            for name in CORRELATION_FIELDS
            if getattr(record, name, None) is not None
        )
        head = f"{self.formatTime(record)} {record.levelname} {record.name}"
        text = (
            f"{head} [{fields}] {record.getMessage()}"
            if fields
            else f"{head} {record.getMessage()}"
        )
        if record.exc_info:
            record.exc_text = record.exc_text or self.formatException(record.exc_info)
        if record.exc_text:
            text = f"{text}\n{record.exc_text}"
        return text


_HANDLER_MARK = "_tenxgraph_structured"


def setup_structured_logging(
    level: int = logging.INFO,
    json_format: bool = True,
    redact_secrets: bool = True,
    logger_name: str = "tenxgraph",
) -> logging.Handler:
    """Configure ``logger_name`` to write one structured record per line to stderr.

    Calling it again replaces the handler an earlier call installed (never two).

    Args:
        level: applied to the logger and the handler (a ``logging`` level).
        json_format: one JSON object per line; ``False``: a text line with the same fields.
        redact_secrets: attach a ``SecretRedactionFilter`` to the handler.
        logger_name: the logger to configure (10xGraph's default is ``"agentflow"``;
            tenxgraph's modules log under ``"tenxgraph"``).

    Returns:
        The installed handler (a ``logging.StreamHandler``), to add filters or swap its
        stream.
    """
    logger = logging.getLogger(logger_name)
    for old in [h for h in logger.handlers if getattr(h, _HANDLER_MARK, False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    setattr(handler, _HANDLER_MARK, True)
    handler.setLevel(level)
    handler.addFilter(CorrelationFilter())
    if redact_secrets:
        handler.addFilter(SecretRedactionFilter())
    handler.setFormatter(_JsonFormatter() if json_format else _TextFormatter())
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
