"""Connection-time failures of PostgreSQL: permanent or transient, and the first connection.

``psycopg_pool`` connects in background workers: a pool pointed at a wrong role or database
keeps retrying, logs each failed attempt, and the caller only learns of it from a
``PoolTimeout`` after ``timeout`` seconds. So before a pool is opened, ``aconnect_first``
(and ``connect_first`` for the sync ``setup()``) makes the first connection itself:

* a **permanent** failure (wrong password, unknown role or database, no ``pg_hba.conf`` entry,
  a host name that does not resolve, TLS settings that cannot work) raises
  ``tenxgraph.core.exceptions.StorageConnectionError`` at once, naming which;
* a **transient** one (connection refused, timeout, too many clients, server starting up or
  shutting down) is retried with capped exponential backoff until the deadline (the pool's
  ``timeout``), logging ONE line per attempt, then raises
  ``tenxgraph.core.exceptions.TransientStorageError``.

libpq reports startup failures without a SQLSTATE (psycopg's ``OperationalError.sqlstate`` is
``None``: the server's error fields are folded into the message), so those are classified by
libpq's and the server's message texts (English, as libpq and a server with ``lc_messages``
``C`` or ``en`` write them) and by libpq's ``needs_password`` / ``used_password`` flags; an
error that carries a SQLSTATE is classified by it (``28P01``, ``28000``, ``3D000``, ``53300``,
``57P03`` ...). Anything not recognised counts as transient, so it is retried until the
deadline rather than refused by mistake. Messages go through the one redaction routine with
the DSN's password as a known secret.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
from typing import Any

import psycopg

from tenxgraph._redact import redact
from tenxgraph.core.exceptions import StorageConnectionError, TransientStorageError

__all__ = ["Failure", "aconnect_first", "classify", "connect_first", "parse_problem"]

log = logging.getLogger("tenxgraph.storage.postgres")

#: SQLSTATEs that no retry can fix (class 28 invalid authorization, 3D000 unknown database,
#: 42501 insufficient privilege at connect) and what each means.
_PERMANENT_SQLSTATES = {
    "28P01": "password",
    "28000": "permission",
    "3D000": "database",
    "42501": "permission",
}

#: Message fragments (lower case) of permanent startup failures, checked in order.
_PERMANENT_TEXTS: tuple[tuple[str, str], ...] = (
    ("password authentication failed", "password"),
    ("authentication failed for user", "password"),
    ("no password supplied", "password"),
    ("fe_sendauth", "password"),
    ("no pg_hba.conf entry", "permission"),
    ("pg_hba.conf rejects connection", "permission"),
    ("is not permitted to log in", "permission"),
    ("permission denied for database", "permission"),
    ("name or service not known", "host"),
    ("nodename nor servname provided", "host"),
    ("no address associated with hostname", "host"),
    ("could not translate host name", "host"),
    ("server does not support ssl", "tls"),
    ("certificate", "tls"),
    ("sslmode", "tls"),
    ("ssl error", "tls"),
    ("invalid connection option", "config"),
    ("invalid sslmode value", "tls"),
    ("invalid integer value", "config"),
)

#: What each permanent reason asks the operator to fix.
_ADVICE = {
    "password": "the password was rejected for this role; fix the password in the DSN",
    "role": "the role does not exist on the server; fix the user in the DSN or create the role",
    "database": "the database does not exist; fix the database name in the DSN or create it",
    "permission": "the server does not allow this role to connect to this database "
    "(pg_hba.conf or CONNECT privilege); fix the DSN or the server's access rules",
    "host": "the host name does not resolve; fix the host in the DSN",
    "tls": "the TLS settings cannot work with this server; fix sslmode / the certificates",
    "config": "the DSN holds an invalid connection option; fix the DSN",
}

_DOES_NOT_EXIST = re.compile(r"\b(role|database) \"[^\"]*\" does not exist")


@dataclasses.dataclass(frozen=True, slots=True)
class Failure:
    """How a connection attempt failed.

    Attributes:
        permanent: ``True`` when retrying cannot help.
        reason: ``"password"``, ``"role"``, ``"database"``, ``"permission"``, ``"host"``,
            ``"tls"`` or ``"config"`` for permanent failures; ``"refused"``, ``"timeout"``,
            ``"too_many_clients"``, ``"starting_up"``, ``"shutting_down"``, ``"unavailable"``
            for transient ones.
        sqlstate: the server's SQLSTATE when the error carries one, else ``None``.
    """

    permanent: bool
    reason: str
    sqlstate: str | None = None


def classify(exc: BaseException) -> Failure:
    """Classify a failed connection attempt.

    Args:
        exc: what ``psycopg.connect`` / ``AsyncConnection.connect`` raised (any exception:
            ``OSError`` and timeouts count as transient).

    Returns:
        The ``Failure``: permanent or transient, with its reason.
    """
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate in _PERMANENT_SQLSTATES:
        return Failure(True, _PERMANENT_SQLSTATES[sqlstate], sqlstate)
    if sqlstate == "53300":
        return Failure(False, "too_many_clients", sqlstate)
    if sqlstate == "57P03":
        return Failure(False, "starting_up", sqlstate)
    if sqlstate is not None and sqlstate[:2] in ("08", "53", "57"):
        return Failure(False, "unavailable", sqlstate)
    if not isinstance(exc, psycopg.Error):
        return Failure(False, "timeout" if isinstance(exc, TimeoutError) else "unavailable")
    text = str(exc).lower()
    if "too many clients" in text or "remaining connection slots" in text:
        return Failure(False, "too_many_clients", sqlstate)
    if "starting up" in text or "in recovery mode" in text or "not yet accepting" in text:
        return Failure(False, "starting_up", sqlstate)
    if "shutting down" in text or "terminating connection" in text:
        return Failure(False, "shutting_down", sqlstate)
    if "temporary failure in name resolution" in text or "try again" in text:
        return Failure(False, "unavailable", sqlstate)
    m = _DOES_NOT_EXIST.search(text)
    if m:
        return Failure(True, m.group(1), sqlstate)
    for fragment, reason in _PERMANENT_TEXTS:
        if fragment in text:
            return Failure(True, reason, sqlstate)
    pgconn = getattr(exc, "pgconn", None)
    if pgconn is not None and getattr(pgconn, "needs_password", False):
        return Failure(True, "password", sqlstate)
    if "refused" in text:
        return Failure(False, "refused", sqlstate)
    if "timeout" in text or "timed out" in text:
        return Failure(False, "timeout", sqlstate)
    return Failure(False, "unavailable", sqlstate)


#: libpq's DSN parse errors (lower case) that quote part of the DSN, and what we say instead.
_PARSE_PROBLEMS: tuple[tuple[str, str], ...] = (
    ("unexpected spaces found", "the URL holds an unencoded space: percent-encode it as %20"),
    (
        'missing "=" after',
        "a value holds an unquoted space, or a quote libpq does not understand: put values "
        "with spaces in single quotes and escape ' and \\ inside "
        "them with a backslash; double quotes are not quoting characters",
    ),
    (
        "unterminated quoted string",
        "a single-quoted value is never closed: end it with ' and escape a ' inside it as \\'",
    ),
    ("invalid percent-encoded token", "the URL holds a '%' that does not start a %XX escape"),
    ("invalid uri query parameter", "the URL's query string holds an unknown parameter"),
    ("invalid connection option", "the DSN holds an unknown connection option"),
    ("invalid uri", "the URL is malformed"),
)

_QUOTED = re.compile(r'"[^"]*"+')
_OPTION_NAME = re.compile(r'invalid (?:connection option|URI query parameter):? "([a-z_]+)"')


def parse_problem(exc: BaseException, candidates: list[str] | tuple[str, ...]) -> str:
    """What is wrong with a DSN libpq cannot parse, without quoting any of its values.

    libpq's parse errors quote the fragment they stumbled on, which may be a piece of the
    password (``missing "=" after "word"`` for ``password=two word``). Known errors are
    replaced by our own sentence (naming an unknown option only when it is a plain lower-case
    keyword that is no part of a candidate secret); anything else is shown with every quoted
    fragment and every candidate secret masked.

    Args:
        exc: what ``conninfo_to_dict`` raised.
        candidates: ``tenxgraph._redact.secret_candidates`` of the DSN.

    Returns:
        One line naming the problem and its fix.
    """
    text = " ".join(str(exc).split())
    lower = text.lower()
    for fragment, sentence in _PARSE_PROBLEMS:
        if fragment in lower:
            m = _OPTION_NAME.search(text)
            if m and not any(m.group(1) in c for c in candidates):
                return f"{sentence} ({m.group(1)!r})"
            return sentence
    return redact(_QUOTED.sub('"***"', text), candidates) or type(exc).__name__


def _detail(exc: BaseException, secrets: tuple[str, ...]) -> str:
    """The driver's message on one line, redacted."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return redact(text, secrets)


def permanent_error(
    exc: BaseException, failure: Failure, target: str, user: str | None, secrets: tuple[str, ...]
) -> StorageConnectionError:
    """The ``StorageConnectionError`` for a permanent failure (message names the role and
    the target, never the password)."""
    who = f" as role {user!r}" if user else ""
    return StorageConnectionError(
        f"cannot connect to Postgres at {target}{who}: {_ADVICE[failure.reason]} "
        f"({_detail(exc, secrets)})",
        context={
            "backend": "postgresql",
            "reason": failure.reason,
            "target": target,
            "sqlstate": failure.sqlstate,
        },
    )


def _unreachable(
    exc: BaseException,
    failure: Failure,
    target: str,
    attempts: int,
    waited_s: float,
    secrets: tuple[str, ...],
) -> TransientStorageError:
    return TransientStorageError(
        f"Postgres at {target} is not reachable ({failure.reason}) after {attempts} attempt(s) "
        f"in {waited_s:.1f} s: {_detail(exc, secrets)}; check that the server is running and "
        "accepting connections, then retry",
        context={"backend": "postgresql", "sqlstate": failure.sqlstate, "reason": failure.reason},
    )


def _backoff(attempt: int) -> float:
    return float(min(2.0, 0.1 * 2 ** (attempt - 1)))


def _log_attempt(
    exc: BaseException,
    failure: Failure,
    target: str,
    attempt: int,
    left_s: float,
    secrets: tuple[str, ...],
) -> None:
    log.warning(
        "Postgres at %s not reachable (attempt %d, %s; retrying for %.1f s more): %s",
        target,
        attempt,
        failure.reason,
        max(left_s, 0.0),
        _detail(exc, secrets),
    )


async def aconnect_first(
    conninfo: str,
    kwargs: dict[str, Any],
    *,
    timeout_s: float,
    target: str,
    user: str | None,
    secrets: tuple[str, ...] = (),
) -> psycopg.AsyncConnection[Any]:
    """Open one connection, failing fast on permanent errors, retrying transient ones.

    Args:
        conninfo: the libpq DSN.
        kwargs: connection arguments (``autocommit``, ``connect_timeout`` ...).
        timeout_s: seconds to keep retrying transient failures.
        target: ``host:port/dbname`` for messages.
        user: the role, for messages.
        secrets: the DSN's password(s), masked in every message and log line.

    Returns:
        An open connection (the caller closes it).

    Raises:
        StorageConnectionError: ``STORAGE_CONNECT_001`` on the first permanent failure.
        TransientStorageError: ``STORAGE_TRANSIENT_001`` when transient failures last past
            ``timeout_s``.
    """
    start = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await psycopg.AsyncConnection.connect(conninfo, **kwargs)
        except (psycopg.Error, OSError, TimeoutError) as exc:
            failure = classify(exc)
            if failure.permanent:
                raise permanent_error(exc, failure, target, user, secrets) from None
            left = timeout_s - (time.monotonic() - start)
            if left <= 0.01:
                raise _unreachable(
                    exc, failure, target, attempt, time.monotonic() - start, secrets
                ) from None
            _log_attempt(exc, failure, target, attempt, left, secrets)
            await asyncio.sleep(min(_backoff(attempt), left))


def connect_first(
    conninfo: str,
    kwargs: dict[str, Any],
    *,
    timeout_s: float,
    target: str,
    user: str | None,
    secrets: tuple[str, ...] = (),
) -> psycopg.Connection[Any]:
    """Sync twin of ``aconnect_first`` (for ``setup()`` outside an event loop).

    Raises:
        StorageConnectionError: ``STORAGE_CONNECT_001`` on the first permanent failure.
        TransientStorageError: ``STORAGE_TRANSIENT_001`` when transient failures last past
            ``timeout_s``.
    """
    start = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return psycopg.connect(conninfo, **kwargs)
        except (psycopg.Error, OSError, TimeoutError) as exc:
            failure = classify(exc)
            if failure.permanent:
                raise permanent_error(exc, failure, target, user, secrets) from None
            left = timeout_s - (time.monotonic() - start)
            if left <= 0.01:
                raise _unreachable(
                    exc, failure, target, attempt, time.monotonic() - start, secrets
                ) from None
            _log_attempt(exc, failure, target, attempt, left, secrets)
            time.sleep(min(_backoff(attempt), left))
