"""Validation of the ``config`` dict of a run (the keys are listed under ``CompiledGraph.ainvoke``).

Known keys are checked for type and range; a key that looks like a misspelling of a known key
(``"thread-id"``, ``"threadId"``, ``"thread_Id"``, ``"userid"``) raises, so a typo cannot silently
start a new thread. Other keys are the application's and pass through untouched.

LangGraph's shape ``{"configurable": {"thread_id": ...}}`` is read too: the known keys found
under ``"configurable"`` are copied to the top level (the sub-dict is left as it is), a value
given in both places must be the same, and LangGraph's time-travel keys (``checkpoint_id``, a
non-empty ``checkpoint_ns``) are refused rather than ignored.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from typing import Any

from tenxgraph._uuid import uuid4_str

from .exceptions import ConfigError

__all__ = [
    "KNOWN_KEYS",
    "MULTITASK_STRATEGIES",
    "RunConfig",
    "check_lease_timing",
    "check_strategy",
    "normalize_config",
]

#: The values of ``config["multitask_strategy"]`` (and of a checkpointer's
#: ``multitask_strategy``) besides ``None``; the names of LangGraph's server (docs/how-to/run-lease.md).
MULTITASK_STRATEGIES = ("reject", "enqueue", "interrupt", "rollback")


def check_strategy(value: Any, where: str) -> str | None:
    """Validate a multitask strategy.

    Args:
        value: ``None`` or one of :data:`MULTITASK_STRATEGIES`.
        where: how the caller names the setting, for the message (``"config['multitask_strategy']"``).

    Returns:
        The value.

    Raises:
        ConfigError: ``CONFIG_001`` for any other value.
    """
    if value is None or (isinstance(value, str) and value in MULTITASK_STRATEGIES):
        return value
    raise ConfigError(
        f"{where} must be None or one of {', '.join(map(repr, MULTITASK_STRATEGIES))}, got "
        f"{value!r}",
        context={"key": "multitask_strategy"},
    )


#: Keys the runtime reads, with their defaults (``...``: no default / set by the runtime).
KNOWN_KEYS: dict[str, Any] = {
    "thread_id": ...,
    "user_id": "anonymous",
    "run_id": ...,
    "durable_checkpoint_every_step": True,
    "recursion_limit": 25,
    "node_timeout": 900.0,
    "tool_timeout": 300.0,
    "multitask_strategy": None,
    "replay_tools": False,
    "_checkpoint_version": ...,
    "_run_id_auto": ...,
    "timestamp": ...,
    "_timestamp_auto": ...,
    "_lease_holder": ...,  # a background run's attempt (tenxgraph.core._recovery)
}

#: Longest ``thread_id`` and ``user_id``, in characters (at most 1,020 UTF-8 bytes): both are
#: primary-key or index columns, and this keeps an index row of every backend far below
#: PostgreSQL's btree limit (about 2,700 bytes; a longer key fails with SQLSTATE 54000).
MAX_THREAD_ID_LEN = 255
MAX_USER_ID_LEN = 255


def _canon(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


_CANON = {_canon(k): k for k in KNOWN_KEYS}


#: Short forms that are almost certainly meant as a known key.
_ALIASES = {"user": "user_id", "thread": "thread_id", "run": "run_id", "uid": "user_id"}


def _misspelling_of(key: str) -> str | None:
    if key in KNOWN_KEYS:
        return None
    if key.lower() in _ALIASES:
        return _ALIASES[key.lower()]
    canon = _canon(key)
    if canon in _CANON:
        return _CANON[canon]
    close = difflib.get_close_matches(canon, list(_CANON), n=1, cutoff=0.85)
    if close and len(canon) >= 5:
        return _CANON[close[0]]
    return None


class RunConfig:
    """A validated view of a run's config dict (the dict itself stays the caller's object).

    Attributes:
        raw: the caller's dict; the runtime writes ``run_id`` and ``_checkpoint_version`` into
            it.
        thread_id (str): the thread (an ``int`` is turned into its decimal ``str``).
        user_id (str): the owner scope (default ``"anonymous"``).
        run_id (str): set to a uuid4 when absent (also when the one present was generated for
            an earlier run of the same dict, recorded in ``config["_run_id_auto"]``).
            ``config["timestamp"]`` (ISO 8601, UTC) is the run's start time, generated the same
            way when absent.
        durable (bool): ``durable_checkpoint_every_step``.
        recursion_limit (int): node executions allowed per run.
        node_timeout, tool_timeout (float | None): seconds; ``None`` disables.
        multitask_strategy (str | None): ``config["multitask_strategy"]`` (``None`` when
            absent: the checkpointer's default applies).
    """

    __slots__ = (
        "raw",
        "thread_id",
        "user_id",
        "run_id",
        "durable",
        "recursion_limit",
        "node_timeout",
        "tool_timeout",
        "multitask_strategy",
    )

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.thread_id: str = raw["thread_id"]
        self.user_id: str = raw.get("user_id", "anonymous")
        self.run_id: str = raw["run_id"]
        self.durable: bool = raw.get("durable_checkpoint_every_step", True)
        self.recursion_limit: int = raw.get("recursion_limit", 25)
        self.node_timeout: float | None = raw.get("node_timeout", 900.0)
        self.tool_timeout: float | None = raw.get("tool_timeout", 300.0)
        self.multitask_strategy: str | None = raw.get("multitask_strategy")


def _check_text(key: str, value: str) -> None:
    """Ids are stored as text by every tier: refuse what one of them could not store (NUL,
    lone surrogates), so a run cannot start and then fail on some backends only."""
    if "\x00" in value:
        raise ConfigError(f"config[{key!r}] must not contain NUL characters", context={"key": key})
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(
                f"config[{key!r}] must be valid Unicode text (it holds a lone surrogate)",
                context={"key": key},
            ) from None


#: LangGraph ``configurable`` keys whose meaning tenxgraph does not provide: refused, so a run
#: never silently starts from the latest state when the caller asked for an older checkpoint.
_LANGGRAPH_UNSUPPORTED = {
    "checkpoint_id": "LangGraph time travel is not supported; read an older version with "
    "get_state_history(config) or checkpointer.aget_version(config, version)",
    "checkpoint_ns": "checkpoint namespaces (LangGraph subgraphs) are not supported",
}


def _lift_configurable(config: dict[str, Any]) -> None:
    """Copy the known keys of ``config["configurable"]`` to the top level of ``config``.

    Raises:
        ConfigError: ``CONFIG_001`` when ``configurable`` is not a dict, a key is given with
            two different values, or a LangGraph key tenxgraph cannot honour is set.
    """
    sub = config.get("configurable")
    if sub is None:
        return
    if not isinstance(sub, dict):
        raise ConfigError(
            f"config['configurable'] must be a dict, got {type(sub).__name__}",
            context={"key": "configurable"},
        )
    for key, value in sub.items():
        if not isinstance(key, str):
            continue
        if key in _LANGGRAPH_UNSUPPORTED:
            if key == "checkpoint_ns" and value in ("", None):
                continue
            raise ConfigError(
                f"config['configurable'][{key!r}]: {_LANGGRAPH_UNSUPPORTED[key]}",
                context={"key": key},
            )
        target = _misspelling_of(key)
        if target is not None:
            raise ConfigError(
                f"config['configurable'] key {key!r} looks like a misspelling of {target!r}; "
                "rename it",
                context={"key": key, "did_you_mean": target},
            )
        if key not in KNOWN_KEYS or key.startswith("_"):
            continue  # the application's own keys stay where they are
        if key in config and config[key] is not None and value is not None:
            same = str(config[key]) == str(value) if key in _ID_KEYS else config[key] == value
            if not same:
                raise ConfigError(
                    f"config[{key!r}] is {config[key]!r} but config['configurable'][{key!r}] is "
                    f"{value!r}; give it once, or the same value in both places",
                    context={"key": key},
                )
            continue
        if value is not None:
            config[key] = value


_ID_KEYS = frozenset({"thread_id", "user_id", "run_id"})


def check_lease_timing(
    lease_ttl_s: Any, lease_renew_s: Any, enqueue_timeout_s: Any
) -> tuple[float, float, float | None]:
    """Validate a checkpointer's run-lease timing (docs/how-to/run-lease.md).

    Args:
        lease_ttl_s: seconds a lease lasts after its last renewal (a crashed holder's lease
            lapses that long after its last renewal); positive.
        lease_renew_s: seconds between two renewals by the holder; positive and below
            ``lease_ttl_s`` (a renewal must land before the lease lapses).
        enqueue_timeout_s: seconds a queued run (or a resume) waits for the lease before
            ``ThreadBusyError``; positive, or ``None`` to wait as long as it takes.

    Returns:
        The three values as floats (``None`` kept).

    Raises:
        ConfigError: ``CONFIG_001`` for a non-number, a non-positive value, or a renewal
            interval not below the lease time.
    """

    def number(name: str, v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v == float("inf"):
            raise ConfigError(
                f"{name} must be a positive, finite number of seconds, got {v!r}",
                context={"key": name},
            )
        return float(v)

    ttl = number("lease_ttl_s", lease_ttl_s)
    renew = number("lease_renew_s", lease_renew_s)
    if renew >= ttl:
        raise ConfigError(
            f"lease_renew_s ({renew}) must be below lease_ttl_s ({ttl}): the holder renews its "
            "lease before it lapses",
            context={"key": "lease_renew_s"},
        )
    timeout = None if enqueue_timeout_s is None else number("enqueue_timeout_s", enqueue_timeout_s)
    return ttl, renew, timeout


def _check_timeout_value(config: dict[str, Any], key: str) -> None:
    """Timeouts: a positive number of seconds; ``None`` or a non-positive number disables the
    deadline (10xGraph's graph reference); anything else is refused."""
    if key not in config or config[key] is None:
        return
    v = config[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:  # NaN
        raise ConfigError(
            f"config[{key!r}] must be a number of seconds or None, got {v!r}",
            context={"key": key},
        )
    if v <= 0:
        config[key] = None


def normalize_config(
    config: dict[str, Any] | None, *, require_thread: bool = True, new_run: bool = True
) -> RunConfig:
    """Validate ``config`` in place and return a :class:`RunConfig`.

    Args:
        config: the caller's dict (``None``: a new dict with a generated ``thread_id``).
        require_thread: raise when ``thread_id`` is missing instead of generating one.
        new_run: assign a fresh ``run_id`` when absent.

    Raises:
        ConfigError: ``CONFIG_001`` for a misspelt key (``context["did_you_mean"]``), an empty,
            non-string or over-long ``thread_id`` (max 255 characters), an empty or over-long
            ``user_id`` (max 255 characters),
            a ``thread_id`` or ``user_id`` holding NUL or a lone surrogate,
            a non-positive ``recursion_limit``, a non-numeric timeout, a non-bool
            ``durable_checkpoint_every_step``, an unknown ``multitask_strategy``; a ``configurable`` sub-dict (LangGraph's shape)
            that is not a dict, repeats a key with another value, or sets ``checkpoint_id``.

    A timeout of ``None`` or ``<= 0`` disables that deadline (stored back as ``None``).
    """
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise ConfigError(f"config must be a dict, got {type(config).__name__}", context={})
    _lift_configurable(config)
    for key in list(config):
        if not isinstance(key, str):
            continue
        target = _misspelling_of(key)
        if target is not None:
            raise ConfigError(
                f"config key {key!r} looks like a misspelling of {target!r}; rename it",
                context={"key": key, "did_you_mean": target},
            )
    tid = config.get("thread_id")
    if tid is None:
        if require_thread:
            raise ConfigError(
                "config['thread_id'] is required, e.g. config={'thread_id': 'conv-1'}",
                context={"key": "thread_id"},
            )
        tid = uuid4_str()
    if isinstance(tid, bool) or not isinstance(tid, (str, int)):
        raise ConfigError(
            f"config['thread_id'] must be a str or int, got {type(tid).__name__}",
            context={"key": "thread_id"},
        )
    tid = str(tid)
    if not tid.strip():
        raise ConfigError("config['thread_id'] must not be empty", context={"key": "thread_id"})
    if len(tid) > MAX_THREAD_ID_LEN:
        raise ConfigError(
            f"config['thread_id'] is {len(tid)} characters; the limit is {MAX_THREAD_ID_LEN}",
            context={"key": "thread_id"},
        )
    _check_text("thread_id", tid)
    config["thread_id"] = tid
    uid = config.get("user_id", "anonymous")
    if uid is None:
        uid = "anonymous"
    if getattr(uid, "is_admin_scope", False):
        raise ConfigError(
            "ADMIN_SCOPE only lists threads (list_threads({'user_id': ADMIN_SCOPE})); read or "
            "change a thread with its owner's user_id (ThreadInfo.user_id of that listing)",
            context={"key": "user_id"},
        )
    if isinstance(uid, bool) or not isinstance(uid, (str, int)) or not str(uid).strip():
        raise ConfigError("config['user_id'] must be a non-empty str", context={"key": "user_id"})
    if len(str(uid)) > MAX_USER_ID_LEN:
        raise ConfigError(
            f"config['user_id'] is {len(str(uid))} characters; the limit is {MAX_USER_ID_LEN}",
            context={"key": "user_id"},
        )
    _check_text("user_id", str(uid))
    if str(uid) == "*":
        raise ConfigError(
            "config['user_id'] '*' is not a user id; to list every user's threads an "
            "application passes tenxgraph.storage.checkpointer.ADMIN_SCOPE explicitly",
            context={"key": "user_id"},
        )
    config["user_id"] = str(uid)
    generated = config.get("run_id") and config.get("_run_id_auto") == config.get("run_id")
    if new_run and (not config.get("run_id") or generated):
        # A run_id the runtime generated for an earlier run of this same config dict is not
        # reused: each invocation is its own run.
        config["run_id"] = uuid4_str()
        config["_run_id_auto"] = config["run_id"]
    elif "run_id" in config:
        config["run_id"] = str(config["run_id"])
    else:
        config["run_id"] = ""
    stamp = config.get("timestamp")
    if stamp is not None and not isinstance(stamp, str):
        raise ConfigError(
            f"config['timestamp'] must be an ISO 8601 str, got {type(stamp).__name__}",
            context={"key": "timestamp"},
        )
    if new_run and (stamp is None or stamp == config.get("_timestamp_auto")):
        # 10xGraph's graph reference: the run's start time, ISO 8601, generated when absent
        # (and regenerated for each new run of a dict whose stamp the runtime wrote).
        config["timestamp"] = dt.datetime.now(dt.UTC).isoformat()
        config["_timestamp_auto"] = config["timestamp"]
    rl = config.get("recursion_limit", 25)
    if isinstance(rl, bool) or not isinstance(rl, int) or rl < 1:
        raise ConfigError(
            f"config['recursion_limit'] must be a positive int, got {rl!r}",
            context={"key": "recursion_limit"},
        )
    d = config.get("durable_checkpoint_every_step", True)
    if not isinstance(d, bool):
        raise ConfigError(
            "config['durable_checkpoint_every_step'] must be True or False",
            context={"key": "durable_checkpoint_every_step"},
        )
    if not isinstance(config.get("replay_tools", False), bool):
        raise ConfigError(
            "config['replay_tools'] must be True or False (True re-executes tool calls a "
            "rewound or forked run replays, under a new idempotency key)",
            context={"key": "replay_tools"},
        )
    _check_timeout_value(config, "node_timeout")
    _check_timeout_value(config, "tool_timeout")
    check_strategy(config.get("multitask_strategy"), "config['multitask_strategy']")
    return RunConfig(config)
