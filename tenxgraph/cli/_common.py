"""Shared pieces of the ``tenxgraph`` command: exit codes, the error type, store options."""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass
from typing import Any

#: Exit code: success.
EXIT_OK = 0
#: Exit code: not found (a thread, a version), a verification mismatch or a double execution.
EXIT_MISMATCH = 1
#: Exit code: usage or configuration error (bad arguments or data, a DSN naming an unknown
#: role, database or host, missing tables: run ``tenxgraph setup``).
EXIT_USAGE = 2
#: Exit code: the store cannot be reached or failed (refused, timeout, too many clients).
EXIT_UNREACHABLE = 3
#: Exit code: permission denied (Postgres or Redis password rejected, ``pg_hba.conf``, missing
#: privileges on the tables).
EXIT_PERMISSION = 4
#: Exit code: stored data is damaged (a row modified outside tenxgraph cannot be decoded); the
#: message names the thread and version.
EXIT_DAMAGED = 5

#: Seconds the read commands and ``setup`` wait for the store by default (``--timeout``).
DEFAULT_TIMEOUT_S = 5.0


class CliError(Exception):
    """An error reported to the user with an exit code (no traceback)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# ==================================================================================================
# Stores
# ==================================================================================================
@dataclass(slots=True)
class StoreSpec:
    """Where the state lives (picklable, so worker processes can rebuild the checkpointer).

    Attributes:
        dsn: Postgres DSN (``None``: embedded SQLite at ``db``).
        redis_url: Redis URL of the shared cache (Postgres only; ``None``: no Redis tier).
        schema: Postgres schema.
        redis_prefix: prefix of every Redis key.
        db: SQLite file.
        history_limit: versions kept per thread (``0``: all).
        timeout_s: seconds to keep retrying an unreachable Postgres (the pool's ``timeout``).
        redis_cluster: ``redis_url`` names a node of a Redis Cluster.
        partitions: hash partitions of a fresh Postgres schema (``None``: plain tables).
        thread_ttl_s: the checkpointer's default thread time to live in seconds
            (``threads sweep``; ``None``: only threads with their own TTL expire).
        enforce_user_isolation: the checkpointer's isolation setting (``users erase``).
    """

    dsn: str | None = None
    redis_url: str | None = None
    schema: str = "public"
    redis_prefix: str = "tenxgraph:"
    db: str = "tenxgraph.sqlite"
    history_limit: int = 20
    timeout_s: float = 30.0
    redis_cluster: bool = False
    partitions: int | None = None
    thread_ttl_s: float | None = None
    enforce_user_isolation: bool = True

    def secrets(self) -> tuple[str, ...]:
        """Every string of the DSN and Redis URL that may be (part of) a password."""
        return arg_secrets(self.dsn, self.redis_url)

    def describe(self) -> str:
        """A one-line, password-free description."""
        from tenxgraph.core.exceptions import redact

        if self.dsn:
            cache = (
                f" + Redis {redact(self.redis_url, self.secrets())} (prefix {self.redis_prefix!r})"
                if self.redis_url
                else ""
            )
            return f"Postgres {redact(self.dsn, self.secrets())} (schema {self.schema!r}){cache}"
        return f"embedded SQLite store {self.db}"

    def setup_command(self) -> str:
        """The ``tenxgraph setup`` command line that creates this store's tables (redacted)."""
        from tenxgraph.core.exceptions import redact

        if self.dsn:
            schema = f" --schema {self.schema}" if self.schema != "public" else ""
            return f"tenxgraph setup --dsn '{redact(self.dsn, self.secrets())}'{schema}"
        return f"tenxgraph setup --db {self.db}"

    def checkpointer(self) -> Any:
        """A new checkpointer for this store (not yet set up).

        Raises:
            CliError: exit code 2 when the Postgres / Redis drivers are not installed.
        """
        if self.dsn:
            try:
                import psycopg  # noqa: F401
                import psycopg_pool  # noqa: F401

                if self.redis_url:
                    import redis  # noqa: F401
            except ImportError as exc:
                raise CliError(
                    f"{exc.name} is not installed: pip install 'tenxgraph[postgres,redis]' "
                    "(or, in a clone, pip install -e '.[postgres,redis]')",
                    EXIT_USAGE,
                ) from None
            from tenxgraph.storage.checkpointer import PgCheckpointer

            return PgCheckpointer(
                postgres_dsn=self.dsn,
                redis_url=self.redis_url,
                schema=self.schema,
                redis_prefix=self.redis_prefix,
                state_history_limit=self.history_limit,
                pool_config={"timeout": self.timeout_s},
                redis_cluster=self.redis_cluster,
                partitions=self.partitions,
                thread_ttl_s=self.thread_ttl_s,
                enforce_user_isolation=self.enforce_user_isolation,
            )
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        return SqliteCheckpointer(
            self.db,
            state_history_limit=self.history_limit,
            thread_ttl_s=self.thread_ttl_s,
            enforce_user_isolation=self.enforce_user_isolation,
        )


def _store_spec(args: argparse.Namespace, default_db: str | None = None) -> StoreSpec:
    db = getattr(args, "db", None) or default_db or "tenxgraph.sqlite"
    return StoreSpec(
        dsn=getattr(args, "dsn", None),
        redis_url=getattr(args, "redis_url", None) if getattr(args, "dsn", None) else None,
        schema=getattr(args, "schema", None) or "public",
        redis_prefix=getattr(args, "redis_prefix", None) or "tenxgraph:",
        db=str(db),
        history_limit=getattr(args, "history_limit", 20),
        timeout_s=getattr(args, "timeout", None) or 30.0,
        redis_cluster=bool(getattr(args, "redis_cluster", False)),
        partitions=getattr(args, "partitions", None),
        thread_ttl_s=getattr(args, "thread_ttl_s", None),
        enforce_user_isolation=not getattr(args, "no_isolation", False),
    )


async def _open(spec: StoreSpec, *, read_only: bool = False) -> Any:
    """A checkpointer ready to use: its schema set up (``setup``, ``demo``, ``replay``), or, with
    ``read_only``, checked without creating or migrating anything (every ``threads`` command).

    Raises:
        CliError: with the exit code of ``cli_error`` (2 missing tables or bad options,
            3 unreachable, 4 permission).
    """
    from tenxgraph.core.exceptions import ConfigError

    try:
        cp = spec.checkpointer()
    except (ConfigError, ValueError) as exc:
        raise CliError(f"bad store options: {one_line(exc, spec.secrets())}", EXIT_USAGE) from None
    try:
        if read_only:
            await cp.acheck_schema()
        else:
            await cp.asetup()
    except Exception as exc:
        with contextlib.suppress(Exception):
            await cp.aclose()
        raise cli_error(exc, spec) from None
    return cp


def arg_secrets(*values: str | None) -> tuple[str, ...]:
    """Every string of the given DSNs / URLs (``None`` skipped) that may be (part of) a
    password, even when they are malformed (``tenxgraph._redact.secret_candidates``)."""
    from tenxgraph._redact import secret_candidates

    return tuple(c for v in values for c in secret_candidates(v))


def one_line(exc: BaseException | str, secrets: tuple[str, ...] = ()) -> str:
    """An error's text on one line, redacted (``secrets``: known or candidate passwords,
    masked wherever they appear, see ``arg_secrets``)."""
    from tenxgraph.core.exceptions import redact

    return redact(" ".join(str(exc).split()), secrets)


def cli_error(exc: BaseException, spec: StoreSpec | None = None) -> CliError:
    """The one-line message and exit code for an error met while using a store.

    Args:
        exc: the error (the tenxgraph family, ``OSError``, anything else).
        spec: the store, for the message (``None``: not named).

    Returns:
        A ``CliError``: 2 for configuration (bad options, unknown role, database or host,
        TLS, missing or newer tables), 3 for an unreachable or failing store, 4 for a
        permission refused, 5 for damaged stored data, 1 for anything unexpected.
    """
    from tenxgraph.core.exceptions import (
        ConfigError,
        SchemaMissingError,
        SchemaVersionError,
        SerializationError,
        StorageConnectionError,
        StorageError,
        TenxGraphError,
        TransientStorageError,
        ValidationError,
    )

    where = f"{spec.describe()}: " if spec is not None else ""
    secrets = spec.secrets() if spec is not None else ()
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, SchemaMissingError):
        found = exc.context.get("found")
        what = "has no tenxgraph tables" if found is None else f"holds schema version {found}"
        run = spec.setup_command() if spec is not None else "tenxgraph setup"
        return CliError(
            f"{spec.describe() if spec else 'the store'} {what}; create them with: {run}",
            EXIT_USAGE,
        )
    if isinstance(exc, SchemaVersionError):
        return CliError(f"{where}{one_line(exc, secrets)}", EXIT_USAGE)
    if isinstance(exc, StorageConnectionError):
        code = (
            EXIT_PERMISSION
            if exc.context.get("reason") in ("password", "permission")
            else EXIT_USAGE
        )
        return CliError(one_line(exc, secrets), code)
    if isinstance(exc, SerializationError):
        tid = exc.context.get("thread_id")
        hint = (
            f"; `tenxgraph threads history {tid}` lists the versions still readable"
            if isinstance(tid, str) and "\n" not in tid
            else ""
        )
        return CliError(f"{where}stored data damaged: {one_line(exc, secrets)}{hint}", EXIT_DAMAGED)
    if isinstance(exc, TransientStorageError | OSError):
        return CliError(f"{where}{one_line(exc, secrets)}", EXIT_UNREACHABLE)
    if isinstance(exc, StorageError):
        if exc.context.get("sqlstate") == "42501":
            return CliError(f"{where}{one_line(exc, secrets)}", EXIT_PERMISSION)
        return CliError(f"{where}{one_line(exc, secrets)}", EXIT_UNREACHABLE)
    if isinstance(exc, ConfigError | ValidationError):
        return CliError(one_line(exc, secrets), EXIT_USAGE)
    if isinstance(exc, TenxGraphError):
        return CliError(one_line(exc, secrets), EXIT_MISMATCH)
    return CliError(f"unexpected {type(exc).__name__}: {one_line(exc, secrets)}", EXIT_MISMATCH)


def _add_store_args(p: argparse.ArgumentParser, *, db_help: str) -> None:
    g = p.add_argument_group("store")
    g.add_argument(
        "--dsn", help="PostgreSQL DSN (postgresql://user@host:5432/db); without it, SQLite"
    )
    g.add_argument(
        "--redis-url",
        help="Redis URL of the shared cache (with --dsn), e.g. redis://127.0.0.1:6379/0",
    )
    g.add_argument(
        "--schema", default="public", help="Postgres schema of the tables (default: public)"
    )
    g.add_argument(
        "--redis-prefix",
        default="tenxgraph:",
        help="prefix of the Redis keys (default: tenxgraph:)",
    )
    g.add_argument(
        "--redis-cluster",
        action="store_true",
        help="--redis-url names a node of a Redis Cluster",
    )
    g.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="hash-partition a fresh Postgres schema's tables on thread_id into N partitions",
    )
    g.add_argument("--db", help=db_help)
    g.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds to keep retrying an unreachable Postgres (default: "
        f"{DEFAULT_TIMEOUT_S:g} for setup and threads, 30 for demo and replay)",
    )
