"""Background runs: submit a run, read its status, wait for it, cancel it.

The user's view is the "Background runs and workers" page (docs/how-to/background-runs.md);
``CompiledGraph.asubmit`` / ``aget_run`` / ``ajoin`` / ``astop`` call the functions here. A
submitted run is one row of the store's ``runs`` table (:class:`tenxgraph.run_records.RunRecord`,
schema version 7), durable when :func:`asubmit` returns; a worker (:mod:`tenxgraph.core._recovery`,
``tenxgraph worker``) runs it.

Decisions:

* The input is encoded when submitted (messages as JSON with their ``message_id``, so every
  attempt sends the same ids and a retry of a turn is recognised, docs/idempotent-turns.md); a
  value that JSON cannot hold is refused before anything is written.
* The config keeps its JSON-able keys; the runtime's own (``_checkpoint_version``, ...) and
  ``multitask_strategy`` are dropped: the worker runs each submitted run under the thread's
  run lease, one run of a thread at a time, in submission order.
* A ``run_id`` given in the config makes the submit idempotent: submitting the same id with
  the same input again (messages compared without their generated ids and timestamps) returns
  the recorded run; the same id with a different input is refused (``VALIDATION_000``,
  ``context["reason"] == "conflict"``).
* The result kept is the ``LOW`` one (``messages``, and ``interrupted`` / ``interrupt`` for a
  paused run); a run recovered after a crash reports the whole turn's answer when its input was
  made of messages alone (the idempotent-turn path), else the messages of the attempt that
  finished it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import anyio
import orjson
from pydantic import BaseModel

from tenxgraph.core.exceptions import (
    ConfigError,
    ResourceNotFoundError,
    RunJoinTimeoutError,
    ValidationError,
    forbidden,
)
from tenxgraph.core.state import Message
from tenxgraph.run_records import FINAL_STATUSES, RunRecord
from tenxgraph.storage import crypto
from tenxgraph.telemetry import ATTR, METRIC, SPAN, counter, span

if TYPE_CHECKING:
    from tenxgraph.core.graph.compiled_graph import CompiledGraph
    from tenxgraph.records import ThreadKey
    from tenxgraph.storage.runs import RunStore

__all__ = [
    "RunInfo",
    "aget_run",
    "ajoin",
    "asubmit",
    "cancel",
    "decode_config",
    "decode_input",
    "encode_output",
    "retry_run",
    "run_input_bytes",
    "run_store",
    "sealed_output",
]

#: Config keys written by the runtime, or decided by the worker, never stored with a run.
_DROPPED_KEYS = frozenset(
    {
        "_checkpoint_version",
        "_run_id_auto",
        "_timestamp_auto",
        "_lease_holder",
        "timestamp",
        "run_id",
        "multitask_strategy",
    }
)
#: First and longest pause (seconds) between two reads of a joined run's status.
JOIN_POLL_MIN_S = 0.01
JOIN_POLL_MAX_S = 0.25


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A submitted run as its owner sees it.

    Attributes:
        run_id: the run's id.
        thread_id: its thread.
        status: ``pending``, ``running``, ``interrupted``, ``completed``, ``error`` or
            ``cancelled``.
        attempts: how many times a worker started it (recoveries included).
        last_error: the last failure (``"CODE: message"``), ``""`` when none.
        result: once ``completed`` or ``interrupted``: ``{"messages": [Message, ...]}`` plus
            ``"interrupted"`` / ``"interrupt"`` for a paused run (``ainvoke``'s ``LOW`` result);
            else ``None``.
        created_at: submission time, UNIX seconds.
        updated_at: time of its last change, UNIX seconds.
    """

    run_id: str
    thread_id: str
    status: str
    attempts: int
    last_error: str
    result: dict[str, Any] | None
    created_at: float
    updated_at: float

    @property
    def done(self) -> bool:
        """Whether the run reached a status it never leaves (``interrupted`` included)."""
        return self.status in FINAL_STATUSES


def run_store(app: CompiledGraph[Any]) -> RunStore:
    """The graph's store as a :class:`~tenxgraph.storage.runs.RunStore`.

    Raises:
        ConfigError: ``CONFIG_001`` when the checkpointer has no built-in store (a custom
            checkpointer keeps no runs).
    """
    store = app.checkpointer.store
    if store is None or not callable(getattr(store, "run_insert", None)):
        raise ConfigError(
            f"background runs need a built-in store (InMemoryCheckpointer, SqliteCheckpointer "
            f"or PgCheckpointer); {type(app.checkpointer).__name__} keeps no runs",
            context={"key": "checkpointer"},
        )
    return cast("RunStore", store)


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(type(value).__name__)


def _encode(value: Any, what: str) -> bytes:
    try:
        return orjson.dumps(value, default=_json_default)
    except TypeError as exc:
        raise ValidationError(
            f"the {what} of a background run must be JSON-encodable (it is stored until a "
            f"worker runs it): {exc}",
            context={"field": what, "reason": str(exc)},
        ) from None


def _encode_input(input_data: dict[str, Any] | None, state_cls: type[Any]) -> bytes:
    from tenxgraph.core._runner import parse_input

    # The run's own validation, before anything is written: what ainvoke refuses is refused.
    parse_input(input_data, state_cls)
    if input_data is None:
        return b"null"
    data = dict(input_data)
    if "messages" in data:
        # Fixed here, with their ids, so every attempt sends the same messages.
        msgs = parse_input({"messages": data["messages"]}, state_cls)[0]
        data["messages"] = [m.model_dump(mode="json") for m in msgs]
    return _encode(data, "input")


def decode_input(raw: bytes) -> dict[str, Any] | None:
    """The stored input of a run, its messages rebuilt as :class:`Message` objects."""
    data = orjson.loads(raw)
    if data is None:
        return None
    if "messages" in data:
        data["messages"] = [Message.model_validate(m) for m in data["messages"]]
    return cast("dict[str, Any]", data)


def decode_config(raw: bytes) -> dict[str, Any]:
    """The stored config of a run (JSON-able keys, without the runtime's own)."""
    return cast("dict[str, Any]", orjson.loads(raw))


def encode_output(result: dict[str, Any]) -> bytes:
    """The ``LOW`` part of an ``ainvoke`` result, encoded for the run's row."""
    keep = {
        k: result[k]
        for k in ("messages", "interrupted", "interrupt", "already_processed")
        if k in result
    }
    return orjson.dumps(keep, default=_json_default)


def run_input_bytes(app: CompiledGraph[Any], r: RunRecord) -> bytes:
    """The encoded input of a stored run, opened when the checkpointer has a cipher
    (docs/how-to/encryption.md).

    Raises:
        DecryptionError: ``STORAGE_CRYPTO_001`` when it does not open for this run.
    """
    cipher = app.checkpointer.cipher
    return crypto.open_run_payload(cipher, "input", r.owner, r.thread_id, r.run_id, r.input)


def sealed_output(app: CompiledGraph[Any], r: RunRecord, result: dict[str, Any]) -> bytes:
    """The ``LOW`` part of a run's result as its row stores it (:func:`encode_output`, sealed
    for the run when the checkpointer has a cipher)."""
    cipher = app.checkpointer.cipher
    data = encode_output(result)
    return crypto.seal_run_payload(cipher, "output", r.owner, r.thread_id, r.run_id, data)


def _info(app: CompiledGraph[Any], r: RunRecord) -> RunInfo:
    result: dict[str, Any] | None = None
    if r.output is not None:
        cipher = app.checkpointer.cipher
        raw = crypto.open_run_payload(cipher, "output", r.owner, r.thread_id, r.run_id, r.output)
        result = orjson.loads(raw)
        assert result is not None
        result["messages"] = [Message.model_validate(m) for m in result.get("messages", [])]
    return RunInfo(
        r.run_id,
        r.thread_id,
        r.status,
        r.attempts,
        r.last_error,
        result,
        r.created_at,
        r.updated_at,
    )


async def asubmit(
    app: CompiledGraph[Any], input_data: dict[str, Any] | None, config: dict[str, Any] | None
) -> RunInfo:
    """Record a background run; see ``CompiledGraph.asubmit``."""
    from tenxgraph.core.graph._ids import prepare_run_config

    cfg = dict(config) if config is not None else {}
    rc = await prepare_run_config(cfg, app.id_generator)
    stored_cfg = {k: v for k, v in cfg.items() if k not in _DROPPED_KEYS}
    now = time.time()
    key = app.checkpointer.key_for(rc.raw)
    record = RunRecord(
        run_id=rc.run_id,
        thread_id=rc.thread_id,
        owner=key.user_id,
        status="pending",
        input=crypto.seal_run_payload(
            app.checkpointer.cipher,
            "input",
            key.user_id,
            rc.thread_id,
            rc.run_id,
            _encode_input(input_data, app.state_class),
        ),
        config=_encode(stored_cfg, "config"),
        created_at=now,
        updated_at=now,
    )
    store = run_store(app)
    await app.checkpointer._ensure_setup()  # noqa: SLF001 - the lazy setup every call runs
    with span(SPAN.RUN_SUBMIT, attributes={ATTR.THREAD_ID: rc.thread_id, ATTR.RUN_ID: rc.run_id}):
        stored = await store.run_insert(key, record)
    if stored is record:
        counter(METRIC.RUNS_SUBMITTED, "{run}", "background runs submitted").add(1)
    elif _same_request(run_input_bytes(app, stored)) != _same_request(run_input_bytes(app, record)):
        raise ValidationError(
            f"run id {rc.run_id!r} is already a background run of thread {rc.thread_id!r} "
            "with a different input; submit the same input again (idempotent) or use a new "
            "run id",
            context={"field": "run_id", "reason": "conflict", "run_id": rc.run_id},
        )
    return _info(app, stored)


def _same_request(raw: bytes) -> Any:
    """A stored input without what differs between two submits of the same request (the
    generated ``message_id`` and ``timestamp`` of each message)."""
    data = orjson.loads(raw)
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        data["messages"] = [
            {k: v for k, v in m.items() if k not in ("message_id", "timestamp")}
            if isinstance(m, dict)
            else m
            for m in data["messages"]
        ]
    return data


async def aget_run(app: CompiledGraph[Any], config: dict[str, Any], run_id: str) -> RunInfo:
    """A background run of the config's thread and user; see ``CompiledGraph.aget_run``."""
    from tenxgraph.core.config import normalize_config

    cfg = dict(config)
    rc = normalize_config(cfg, new_run=False)
    await app.checkpointer._ensure_setup()  # noqa: SLF001 - the lazy setup every call runs
    found = await run_store(app).run_get(app.checkpointer.key_for(rc.raw), str(run_id))
    if found is None:
        raise ResourceNotFoundError(
            f"no background run {run_id!r} on thread {rc.thread_id!r} for this user",
            context={"thread_id": rc.thread_id, "run_id": str(run_id)},
        )
    return _info(app, found)


def _check_timeout(timeout: object) -> None:
    """Refuse a join timeout that is not ``None`` or a finite number of seconds >= 0."""
    if timeout is None:
        return
    ok = isinstance(timeout, int | float) and not isinstance(timeout, bool)
    if not ok or not math.isfinite(float(cast("float", timeout))) or cast("float", timeout) < 0:
        raise ConfigError(
            f"timeout must be None or a finite number of seconds >= 0, not {timeout!r}",
            context={"key": "timeout"},
        )


async def ajoin(
    app: CompiledGraph[Any],
    config: dict[str, Any],
    run_id: str,
    timeout: float | None,  # noqa: ASYNC109 - the documented API (CompiledGraph.ajoin)
) -> RunInfo:
    """Wait for a background run to reach a final status; see ``CompiledGraph.ajoin``."""
    _check_timeout(timeout)
    info = await aget_run(app, config, run_id)
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    pause = JOIN_POLL_MIN_S
    while not info.done:
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            raise RunJoinTimeoutError(
                f"background run {run_id!r} is still {info.status} after {timeout} s; it goes "
                "on: join again, or stop it with astop",
                context={
                    "thread_id": info.thread_id,
                    "run_id": info.run_id,
                    "status": info.status,
                    "timeout_s": timeout,
                },
            )
        await anyio.sleep(pause if deadline is None else min(pause, max(0.0, deadline - now)))
        pause = min(pause * 2, JOIN_POLL_MAX_S)
        info = await aget_run(app, config, run_id)
    return info


async def cancel(app: CompiledGraph[Any], config: dict[str, Any]) -> RunInfo | None:
    """Cancel the background run named by ``config["run_id"]``, if it is one.

    A ``pending`` run ends ``cancelled`` at once; a ``running`` one gets the thread's durable
    stop request (its worker stops it at the next node boundary and records ``cancelled``;
    a recovering worker honours it before starting). Final runs are left as they are.

    Returns:
        The run as it stands after the request, or ``None`` when ``config["run_id"]`` names no
        background run of this thread and user (the caller then stops the thread as usual).
    """
    run_id = config.get("run_id")
    if not run_id:
        return None
    try:
        info = await aget_run(app, config, str(run_id))
    except ConfigError:
        return None
    except ResourceNotFoundError:
        # Not this user's: refuse, like any write on another user's thread, when another
        # user's background runs hold the thread (it may have no checkpoint yet).
        key = app.checkpointer._key(dict(config))  # noqa: SLF001
        others = await run_store(app).run_list("", thread_id=key.thread_id, limit=1)
        if app.checkpointer.enforce_user_isolation and any(r.owner != key.user_id for r in others):
            raise forbidden(key.thread_id) from None
        return None
    store = run_store(app)
    for _ in range(8):
        if info.status != "pending":
            break
        cur = await store.run_get(app.checkpointer._key(dict(config)), info.run_id)  # noqa: SLF001
        if cur is None:
            return None
        moved = await store.run_update(
            dataclasses.replace(cur, status="cancelled", updated_at=time.time()),
            expect_status=cur.status,
            expect_attempts=cur.attempts,
            notify=True,
        )
        info = await aget_run(app, config, info.run_id)
        if moved:
            break
    return info


async def retry_run(store: RunStore, key: ThreadKey, run_id: str) -> RunRecord:
    """Put a run that ended ``error`` or ``cancelled`` back to ``pending`` (``crashes`` reset,
    ``last_error`` cleared: the earlier failure is not this attempt's); a worker picks it up. ``tenxgraph runs
    retry`` calls this.

    Args:
        store: the store holding the run.
        key: its thread and owner scope.
        run_id: the run.

    Returns:
        The run as stored after the change.

    Raises:
        ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when there is no such run.
        ValidationError: ``VALIDATION_000`` when the run is not ``error`` or ``cancelled``
            (or moved meanwhile).
    """
    cur = await store.run_get(key, run_id)
    if cur is None:
        raise ResourceNotFoundError(
            f"no background run {run_id!r} on thread {key.thread_id!r} for this user",
            context={"thread_id": key.thread_id, "run_id": run_id},
        )
    if cur.status not in ("error", "cancelled"):
        raise ValidationError(
            f"run {run_id!r} is {cur.status}; only error and cancelled runs can be retried",
            context={"field": "status", "reason": cur.status},
        )
    back = dataclasses.replace(
        cur, status="pending", crashes=0, output=None, last_error="", updated_at=time.time()
    )
    if not await store.run_update(
        back, expect_status=cur.status, expect_attempts=cur.attempts, notify=True
    ):
        raise ValidationError(
            f"run {run_id!r} changed while being retried; look at it again",
            context={"field": "status", "reason": "moved"},
        )
    counter(METRIC.RUNS_RETRIED).add(1)
    return back
