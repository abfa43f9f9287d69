"""Shared pieces of the ``tenxgraph`` command: exit codes, the error type, store options."""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass
from typing import Any

#: Exit code: success.
EXIT_OK = 0
#: Exit code: a verification mismatch, a double execution or a missing thread.
EXIT_MISMATCH = 1
#: Exit code: bad arguments or data.
EXIT_USAGE = 2
#: Exit code: the store cannot be reached (or its schema is newer than this code).
EXIT_UNREACHABLE = 3


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
    """

    dsn: str | None = None
    redis_url: str | None = None
    schema: str = "public"
    redis_prefix: str = "tenxgraph:"
    db: str = "tenxgraph.sqlite"
    history_limit: int = 20

    def describe(self) -> str:
        """A one-line, password-free description."""
        from tenxgraph.core.exceptions import redact

        if self.dsn:
            cache = (
                f" + Redis {redact(self.redis_url)} (prefix {self.redis_prefix!r})"
                if self.redis_url
                else ""
            )
            return f"Postgres {redact(self.dsn)} (schema {self.schema!r}){cache}"
        return f"embedded SQLite store {self.db}"

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
            )
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        return SqliteCheckpointer(self.db, state_history_limit=self.history_limit)


def _store_spec(args: argparse.Namespace, default_db: str | None = None) -> StoreSpec:
    db = getattr(args, "db", None) or default_db or "tenxgraph.sqlite"
    return StoreSpec(
        dsn=getattr(args, "dsn", None),
        redis_url=getattr(args, "redis_url", None) if getattr(args, "dsn", None) else None,
        schema=getattr(args, "schema", None) or "public",
        redis_prefix=getattr(args, "redis_prefix", None) or "tenxgraph:",
        db=str(db),
        history_limit=getattr(args, "history_limit", 20),
    )


async def _open(spec: StoreSpec) -> Any:
    """A checkpointer with its schema set up.

    Raises:
        CliError: exit code 3 when the store cannot be reached or its schema is newer.
    """
    from tenxgraph.core.exceptions import (
        ConfigError,
        SchemaVersionError,
        StorageError,
        TransientStorageError,
    )

    try:
        cp = spec.checkpointer()
    except (ConfigError, ValueError) as exc:
        raise CliError(f"bad store options: {exc}", EXIT_USAGE) from None
    try:
        await cp.asetup()
    except (TransientStorageError, SchemaVersionError, OSError) as exc:
        with contextlib.suppress(Exception):
            await cp.aclose()
        raise CliError(f"cannot use {spec.describe()}: {exc}", EXIT_UNREACHABLE) from None
    except StorageError as exc:
        with contextlib.suppress(Exception):
            await cp.aclose()
        raise CliError(f"cannot use {spec.describe()}: {exc}", EXIT_UNREACHABLE) from None
    return cp


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
    g.add_argument("--db", help=db_help)

