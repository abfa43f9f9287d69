"""Checks ``pool_config`` (the Postgres pool settings a store is given) before anything connects.

Every key is known, every value has the type and range ``psycopg_pool`` would demand later (on a
background worker, or not at all), and, when the application passes its own pool, only the keys
the store reads from ``pool_config`` in that case are accepted: the other settings belong to the
application's pool and would otherwise be ignored without a word.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from tenxgraph.core.exceptions import ConfigError

#: ``pool_config`` keys passed on to ``psycopg_pool.AsyncConnectionPool``.
POOL_KEYS = frozenset(
    {
        "min_size",
        "max_size",
        "timeout",
        "max_waiting",
        "max_lifetime",
        "max_idle",
        "reconnect_timeout",
        "num_workers",
        "name",
        "connection_class",
        "configure",
        "reset",
        "check",
    }
)
#: keys the store itself reads: extra connection arguments and psycopg's ``prepare_threshold``.
STORE_KEYS = frozenset({"kwargs", "prepare_threshold"})
#: every key accepted when the store creates its pool.
KNOWN_KEYS = POOL_KEYS | STORE_KEYS
#: the keys still read when the application passes its own pool: ``timeout`` bounds how long
#: the first connection is retried before its error is raised.
APP_POOL_KEYS = frozenset({"timeout"})

#: connection arguments that ``psycopg.AsyncConnection.connect`` takes itself; every other
#: ``kwargs`` key must be a libpq connection parameter.
_PSYCOPG_CONNECT_KEYS = frozenset(
    {"autocommit", "prepare_threshold", "context", "row_factory", "cursor_factory"}
)


def _fail(message: str) -> ConfigError:
    return ConfigError(f"pool_config: {message}", context={"key": "pool_config"})


def _int(cfg: Mapping[str, Any], key: str, minimum: int) -> None:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(f"{key!r} must be an int >= {minimum}, got {value!r}")


def _seconds(cfg: Mapping[str, Any], key: str) -> None:
    value = cfg[key]
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise _fail(f"{key!r} must be a positive, finite number of seconds, got {value!r}")


def _callback(cfg: Mapping[str, Any], key: str) -> None:
    value = cfg[key]
    if value is not None and not callable(value):
        raise _fail(f"{key!r} must be an async callable taking a connection, got {value!r}")


def _connection_kwargs(value: object) -> None:
    if not isinstance(value, Mapping):
        raise _fail(f"'kwargs' must be a dict of connection arguments, got {value!r}")
    libpq: dict[str, Any] = {}
    for key, arg in value.items():
        if not isinstance(key, str):
            raise _fail(f"'kwargs' keys must be strings, got {key!r}")
        if key not in _PSYCOPG_CONNECT_KEYS and arg is not None:
            libpq[key] = arg
    try:
        # libpq parses the keywords (no connection is made): an unknown one is refused here,
        # not on the pool's first connection attempt
        make_conninfo("", **libpq)
    except psycopg.ProgrammingError as exc:
        raise _fail(f"'kwargs': {str(exc).strip()}") from None


_CHECKS: dict[str, Callable[[Mapping[str, Any], str], None]] = {
    "min_size": lambda cfg, key: _int(cfg, key, 0),
    "max_size": lambda cfg, key: _int(cfg, key, 1),
    "max_waiting": lambda cfg, key: _int(cfg, key, 0),
    "num_workers": lambda cfg, key: _int(cfg, key, 1),
    "timeout": _seconds,
    "max_lifetime": _seconds,
    "max_idle": _seconds,
    "reconnect_timeout": _seconds,
    "configure": _callback,
    "reset": _callback,
    "check": _callback,
}


def check_pool_config(pool_config: object, *, app_pool: bool) -> dict[str, Any]:
    """Check ``pool_config`` and return a copy of it.

    Args:
        pool_config: the ``pool_config=`` argument of ``PostgresStore`` / ``PgCheckpointer``
            (``None`` for none).
        app_pool: ``True`` when the application passes its own pool (``pool=`` / ``pg_pool=``):
            only :data:`APP_POOL_KEYS` are then accepted.

    Returns:
        A new dict with the given keys and values (empty for ``None``).

    Raises:
        ConfigError: ``CONFIG_001`` (``context={"key": "pool_config"}``) when ``pool_config`` is
            not a dict, holds an unknown key (or, with ``app_pool``, a key the application's
            pool decides), or a value of the wrong type or range: sizes and counts are ints
            (``min_size``, ``max_waiting`` >= 0; ``max_size``, ``num_workers`` >= 1;
            ``max_size`` >= ``min_size``), durations positive finite seconds, ``name`` a
            string, ``connection_class`` a subclass of ``psycopg.AsyncConnection``,
            ``configure``/``reset``/``check`` callables, ``prepare_threshold`` ``None`` or an
            int >= 0, ``kwargs`` a dict of libpq or psycopg connection arguments.
    """
    if pool_config is None:
        return {}
    if not isinstance(pool_config, Mapping):
        raise _fail(f"must be a dict of pool settings, got {type(pool_config).__name__}")
    cfg: dict[str, Any] = {}
    for key, value in pool_config.items():
        if not isinstance(key, str):
            raise _fail(f"keys must be strings, got {key!r}")
        cfg[key] = value
    unknown = set(cfg) - KNOWN_KEYS
    if unknown:
        raise _fail(f"unknown key(s) {sorted(unknown)}; known: {sorted(KNOWN_KEYS)}")
    if app_pool and set(cfg) - APP_POOL_KEYS:
        raise _fail(
            f"{sorted(set(cfg) - APP_POOL_KEYS)} would be ignored: with the application's own "
            f"pool (pool= / pg_pool=) only {sorted(APP_POOL_KEYS)} is read here; configure "
            "the pool you pass instead"
        )
    for key, check in _CHECKS.items():
        if key in cfg:
            check(cfg, key)
    if "min_size" in cfg and "max_size" in cfg and cfg["max_size"] < cfg["min_size"]:
        raise _fail(f"max_size {cfg['max_size']} is below min_size {cfg['min_size']}")
    if "name" in cfg and cfg["name"] is not None and not isinstance(cfg["name"], str):
        raise _fail(f"'name' must be a string, got {cfg['name']!r}")
    if "connection_class" in cfg:
        cls = cfg["connection_class"]
        if not (isinstance(cls, type) and issubclass(cls, psycopg.AsyncConnection)):
            raise _fail(f"'connection_class' must subclass psycopg.AsyncConnection, got {cls!r}")
    if "prepare_threshold" in cfg:
        threshold = cfg["prepare_threshold"]
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0
        ):
            raise _fail(f"'prepare_threshold' must be None or an int >= 0, got {threshold!r}")
    if "kwargs" in cfg and cfg["kwargs"] is not None:
        _connection_kwargs(cfg["kwargs"])
    return cfg
