"""``BaseCheckpointer``: the public facade over a :class:`~tenxgraph.storage.base.StoreTier`.

It turns states into encoded, diff-only, compare-and-swap writes and back, applies the owner
scope, and offers 10xGraph's checkpointer API (``aput_state``, ``aget_state``,
``alist_messages``, ``alist_threads``, ``aclean_thread`` ...) plus versioned history. Every async
method has a sync twin that runs it through the one shared portal
(:mod:`tenxgraph.core._portal`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Self, TypeVar, cast, get_args

import orjson

from tenxgraph.core._portal import run_sync
from tenxgraph.core.config import check_lease_timing, check_strategy, normalize_config
from tenxgraph.core.exceptions import (
    ConfigError,
    DecryptionError,
    ResourceNotFoundError,
    SchemaMissingError,
    SerializationError,
    StaleStateError,
    StorageError,
    TransientStorageError,
    ValidationError,
    stale,
)
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.reducers import MessageList
from tenxgraph.records import (
    CheckpointWrite,
    DurableView,
    LeaseGrant,
    LedgerEntry,
    Loaded,
    StoredCheckpoint,
    ThreadInfo,
    ThreadKey,
    expand_ranges,
)
from tenxgraph.storage import _fork, _rotate, crypto, serde
from tenxgraph.storage._diff import diff_messages
from tenxgraph.storage._lease_wake import LeaseWaiter
from tenxgraph.storage.base import StoreTier, report_skipped
from tenxgraph.storage.kv import CacheValueStore, MemoryKV
from tenxgraph.storage.retention import check_thread_ttl
from tenxgraph.telemetry import ATTR, METRIC, NO_SPAN, SPAN, counter, enabled, histogram, span

from ._retention import STATE_CACHE_NS, RetentionMixin

__all__ = ["ADMIN_SCOPE", "BaseCheckpointer", "Loaded", "StateSnapshot"]

log = logging.getLogger("tenxgraph.checkpointer")

# Versions and message seqs are stored as signed 64-bit integers by SQLite and Postgres.
_INT64_MAX = 2**63 - 1

StateT = TypeVar("StateT", bound=AgentState)

#: Cache namespaces starting with this are the checkpointer's own (the state cache).
_RESERVED_NS = "__tenxgraph"
_STATE_CACHE_NS = STATE_CACHE_NS


def _check_cache_name(what: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(
            f"the cache {what} must be a non-empty str, got {value!r}", context={"field": what}
        )
    if "\x00" in value:
        raise ValidationError(f"the cache {what} must not contain NUL", context={"field": what})
    return value


def _check_ttl(ttl_seconds: Any) -> float | None:
    if ttl_seconds is None:
        return None
    if (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, (int, float))
        or not math.isfinite(ttl_seconds)
        or ttl_seconds <= 0
    ):
        raise ValidationError(
            f"ttl_seconds must be a positive number of seconds or None, got {ttl_seconds!r}",
            context={"field": "ttl_seconds"},
        )
    return float(ttl_seconds)


class _AdminScope:
    """Type of ``ADMIN_SCOPE`` (one instance; not a string, so no user id can equal it)."""

    __slots__ = ()
    #: read by ``normalize_config`` to explain where the admin scope is accepted.
    is_admin_scope = True

    def __repr__(self) -> str:
        return "ADMIN_SCOPE"

    def __reduce__(self) -> str:
        return "ADMIN_SCOPE"


ADMIN_SCOPE: Any = _AdminScope()
"""The admin scope: ``list_threads({"user_id": ADMIN_SCOPE})`` lists every user's threads.

It is an object, not a string, so it can never come from a user-supplied id (JSON, headers, a
form); an application opts in by passing it explicitly. The per-thread APIs take the owner's
``user_id`` (``ThreadInfo.user_id`` of the admin listing) and refuse the admin scope, and the
string ``"*"`` is refused as a user id everywhere (``CONFIG_001``).
"""

#: Threads whose last read or written version a checkpointer instance remembers (the CAS base of
#: direct ``aput_state`` calls); the least recently used are forgotten beyond this count.
SEEN_MAX_THREADS = 1024
#: ... or beyond this many bytes (each entry counted as :data:`SEEN_ENTRY_BYTES` plus its ids).
SEEN_MAX_BYTES = 1 << 20
#: Estimated memory of one remembered version besides its ids: the map slot, the key and the
#: entry objects (CPython, 64-bit; measured about 300).
SEEN_ENTRY_BYTES = 320


@dataclass(slots=True)
class _Seen:
    """What a checkpointer remembers of the version it last read or wrote of a thread: which
    checkpoint it is (version and creation time), never its state. The state that diffing
    needs is the in-process tier's copy of that checkpoint (already bounded in bytes), or the
    source's."""

    version: int
    created_at: float
    nbytes: int


#: Forks followed up (``forked_from``) to open a sealed ledger row a fork copied from its source.
FORK_LEDGER_HOPS = 8

#: Versions decoded per page by ``get_state_history`` (bounds the raw rows held at once).
HISTORY_PAGE = 16


@dataclass(slots=True)
class StateSnapshot:
    """One kept version of a thread, as returned by ``get_state_history``.

    Attributes:
        thread_id: the thread.
        version: 1, 2, 3, ...
        state: the state exactly as it was at that version, messages included.
        status: ``ExecutionStatus`` value of that checkpoint.
        next_node: the node that was to run next (``execution_meta.current_node`` while running).
        created_at: UNIX seconds.
        origin: what wrote this version when it was a rewind (``{"op": "rewind", "version":
            N}``) or the first version of a fork (``{"op": "fork", "thread_id": source,
            "version": N}``); ``None`` for an ordinary checkpoint.
    """

    thread_id: str
    version: int
    state: AgentState
    status: str
    next_node: str | None
    created_at: float
    origin: dict[str, Any] | None = None


def _seen_size(key: ThreadKey) -> int:
    """Bytes counted for one remembered version of ``key`` (its entry plus its ids)."""
    return SEEN_ENTRY_BYTES + len(key.thread_id) + len(key.user_id)


class BaseCheckpointer(RetentionMixin, Generic[StateT]):
    """Facade shared by :class:`InMemoryCheckpointer`, :class:`SqliteCheckpointer` and
    ``PgCheckpointer``, and the base of an application's own checkpointer.

    Generic in the state class as in 10xGraph: ``InMemoryCheckpointer[MyState]()`` binds
    ``MyState`` as the class stored states are decoded to (same as
    ``bind_state_type``).

    **A checkpointer of your own** (10xGraph's extension point): subclass ``BaseCheckpointer``
    without calling ``__init__`` with a store and implement at least ``aget_state(config)`` and
    ``aput_state(config, state)`` (``asetup``, ``aclear_state`` ... as you need). A graph
    compiled with it reads a run's starting state through your ``aget_state`` and writes each
    checkpoint through your ``aput_state``; its guarantees are the ones your methods give
    (tenxgraph's compare-and-swap, history and diff-only writes belong to its own stores). Its
    tool ledger, stop requests and cache values are kept in this process. Methods of the built-in
    stores that you do not override raise ``StorageError`` naming the method to implement.

    Args:
        store: the source of truth, possibly a ``LayeredStore`` with cache tiers above it;
            ``None`` for a checkpointer of your own (see above).
        state_history_limit: versions kept per thread (the current one and ``N-1`` before it),
            pruned on write; ``0`` or ``None`` keeps all. Default 20.
        enforce_user_isolation: the first writer of a thread owns it; other ``user_id`` s read
            nothing of it and get ``StorageError(STORAGE_FORBIDDEN_001)`` on writes. When
            ``False``, ``user_id`` is ignored.
        state_class: default state class used to decode when a caller does not name one
            (``get_state`` outside a graph). A compiled graph passes its own.
        cache_values: where the cache methods (``aput_cache_value``, ``aput_state_cache``
            ...) keep their entries; default an in-process ``MemoryKV``.
        state_cache_ttl_s: expiry of ``aput_state_cache`` entries in seconds (``None``:
            never).
        multitask_strategy: what a run does when another run holds its thread, unless its
            config says (``config["multitask_strategy"]``): ``None`` (default: no lease, the
            compare-and-swap alone decides, as 10xGraph's durability guide documents),
            ``"reject"``, ``"enqueue"``, ``"interrupt"`` or ``"rollback"`` (docs/how-to/run-lease.md).
        lease_ttl_s: seconds a run lease lasts after its holder's last renewal: how long a
            crashed holder keeps its thread (default 5.0).
        lease_renew_s: seconds between two renewals by a running holder (default 2.0; below
            ``lease_ttl_s``).
        enqueue_timeout_s: seconds a queued run (``enqueue``, ``interrupt``, ``rollback``, or
            a resume) waits for the lease before ``ThreadBusyError`` (default 300.0; ``None``:
            no limit).
        cipher: a :class:`~tenxgraph.storage.crypto.Keyring` (or ``TenantKeyrings``, one
            ring per user) to seal state values, message rows, tool-ledger results and
            state-cache entries with AES-GCM before any tier stores them, each bound to its
            user, thread, version or seq and table; reads of a row that does not open raise
            ``DecryptionError`` (``STORAGE_CRYPTO_001``). ``None`` (default): stored as plain
            JSON. See docs/how-to/encryption.md.
        thread_ttl_s: retention: seconds without a checkpoint after which a thread expires
            and is deleted by the sweep (:meth:`asweep_threads`, the worker's retention loop,
            ``tenxgraph threads sweep``); a thread's own TTL (:meth:`aset_thread_ttl`)
            overrides it. ``None`` (default): threads expire only by their own TTL
            (docs/how-to/erasure-retention.md).

    Raises:
        ConfigError: ``CONFIG_001`` for an unknown ``multitask_strategy``, bad lease timing,
            a ``cipher`` that is not a keyring (or given without a store), or a
            ``thread_ttl_s`` that is not a number of seconds > 0.
        ValueError: a negative ``state_history_limit``.
        TypeError: a subclass without a store that does not implement ``aget_state`` and
            ``aput_state``.
    """

    def __init__(
        self,
        store: StoreTier | None = None,
        *,
        state_history_limit: int | None = 20,
        enforce_user_isolation: bool = True,
        state_class: type[AgentState] = AgentState,
        cache_values: CacheValueStore | None = None,
        state_cache_ttl_s: float | None = None,
        multitask_strategy: str | None = None,
        lease_ttl_s: float = 5.0,
        lease_renew_s: float = 2.0,
        enqueue_timeout_s: float | None = 300.0,
        cipher: crypto.Cipher | None = None,
        thread_ttl_s: float | None = None,
    ) -> None:
        #: the keyring sealing stored content (``None``: plain JSON)
        self.cipher = crypto.check_cipher(cipher)
        if self.cipher is not None and store is None:
            raise ConfigError(
                "cipher= seals what tenxgraph's own stores write; a checkpointer of your own "
                "(no store) stores states itself and must encrypt them itself",
                context={"key": "cipher"},
            )
        if state_history_limit is not None and state_history_limit < 0:
            raise ValueError("state_history_limit must be >= 0 or None")
        #: the default multitask strategy of runs whose config names none
        self.multitask_strategy = check_strategy(multitask_strategy, "multitask_strategy")
        #: the default time to live of idle threads, seconds (``None``: none; see
        #: :meth:`asweep_threads`)
        self.thread_ttl_s = check_thread_ttl(thread_ttl_s)
        self.lease_ttl_s, self.lease_renew_s, self.enqueue_timeout_s = check_lease_timing(
            lease_ttl_s, lease_renew_s, enqueue_timeout_s
        )
        if store is None:
            missing = [
                name
                for name in ("aget_state", "aput_state")
                if getattr(type(self), name) is getattr(BaseCheckpointer, name)
            ]
            if missing:
                raise TypeError(
                    f"Can't instantiate {type(self).__name__} without a store: implement "
                    f"{', '.join(missing)} (a checkpointer of your own), or use "
                    "InMemoryCheckpointer, SqliteCheckpointer or PgCheckpointer"
                )
        self.store = store
        self.cache_values: CacheValueStore = (
            cache_values if cache_values is not None else MemoryKV()
        )
        self.state_cache_ttl_s = state_cache_ttl_s
        # A checkpointer of the application's own (no store): what tenxgraph keeps for it.
        self._custom_versions: dict[ThreadKey, int] = {}
        self._custom_ledger: dict[tuple[ThreadKey, str], LedgerEntry] = {}
        self._custom_stops: dict[ThreadKey, float] = {}
        self.state_history_limit = state_history_limit or None
        self.enforce_user_isolation = enforce_user_isolation
        self.state_class = state_class
        self._setup_done = False
        # Versions this instance last read or wrote, per thread key: the CAS base of direct
        # ``aput_state`` calls that do not carry ``_checkpoint_version``. Only the version and
        # its creation time are kept (never the state: a whole decoded state per thread would
        # sit outside the LRU's byte bound); bounded by SEEN_MAX_THREADS threads and
        # SEEN_MAX_BYTES, least recently used forgotten first, cleared by aclose().
        self._seen: OrderedDict[ThreadKey, _Seen] = OrderedDict()
        self._seen_bytes = 0
        self._ckpt_counter = counter(METRIC.CHECKPOINTS)
        self._write_hist = histogram(METRIC.WRITE_DURATION)
        self._conflicts = counter(METRIC.CONFLICTS)
        # Metric attributes: the source of truth's tier name (low cardinality).
        source = getattr(store, "source", store)
        tier = "custom" if store is None else str(getattr(source, "name", type(source).__name__))
        self._metric_attrs = {ATTR.TIER: tier}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # 10xGraph's custom checkpointers write ``async def aget_state(self, config)``; the
        # runtime passes the state class as a second argument. Accept both shapes.
        super().__init_subclass__(**kwargs)
        fn = cls.__dict__.get("aget_state")
        if fn is None or not inspect.iscoroutinefunction(fn):
            return
        params = list(inspect.signature(fn).parameters.values())
        if len(params) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in params):
            return

        @functools.wraps(fn)
        async def aget_state(self: Any, config: dict[str, Any], state_cls: Any = None) -> Any:
            return await fn(self, config)

        cls.aget_state = aget_state  # type: ignore[method-assign]

    # -- state class -----------------------------------------------------------------------------
    def bind_state_type(self, state_type: type[AgentState]) -> None:
        """Decode stored states as ``state_type`` when a caller does not name a class
        (``get_state`` outside a graph); ``InMemoryCheckpointer[MyState]()`` does the same. A
        compiled graph also binds its own state class when the checkpointer has none.

        Raises:
            TypeError: ``state_type`` is not an ``AgentState`` subclass.
        """
        if not isinstance(state_type, type) or not issubclass(state_type, AgentState):
            raise TypeError(f"bind_state_type expects an AgentState subclass, got {state_type!r}")
        self.state_class = state_type

    @property
    def __orig_class__(self) -> Any:
        # typing sets this attribute on the instance built by ``Checkpointer[MyState](...)``;
        # the setter binds the state class it names.
        return self.__dict__.get("_orig_class")

    @__orig_class__.setter
    def __orig_class__(self, alias: Any) -> None:
        self.__dict__["_orig_class"] = alias
        args = get_args(alias)
        if args and isinstance(args[0], type) and issubclass(args[0], AgentState):
            self.bind_state_type(args[0])

    def _tier(self, method: str) -> StoreTier:
        """The store, or the error telling a custom checkpointer which method to implement."""
        if self.store is None:
            raise StorageError(
                f"{type(self).__name__} has no built-in store: implement {method}() to use it",
                context={"method": method},
            )
        return self.store

    # -- keys ------------------------------------------------------------------------------------
    def key_for(self, config: dict[str, Any]) -> ThreadKey:
        """The :class:`ThreadKey` of a (validated) config: ``user_id`` becomes ``"*"`` when
        isolation is off."""
        user = config.get("user_id") if self.enforce_user_isolation else "*"
        return ThreadKey(str(config["thread_id"]), "anonymous" if user is None else str(user))

    def _key(self, config: dict[str, Any] | None) -> ThreadKey:
        rc = normalize_config(config, new_run=False)
        return self.key_for(rc.raw)

    # -- lifecycle -------------------------------------------------------------------------------
    async def asetup(self) -> None:
        """Create or migrate the schema (idempotent; safe from several processes at once).

        Raises:
            SchemaVersionError: ``STORAGE_SCHEMA_001`` when the stored schema is newer.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the server cannot be reached.
        """
        if self.store is not None:
            with span(SPAN.SETUP, attributes=dict(self._metric_attrs)):
                await self.store.asetup()
        self._setup_done = True

    def setup(self) -> None:
        """Sync twin of :meth:`asetup` (call it outside an event loop)."""
        run_sync(self.asetup, sync_name="setup", async_name="asetup")

    async def acheck_schema(self) -> None:
        """Verify, without creating or migrating anything, that the store's tables exist at the
        version this code uses; later calls then do not run ``asetup()`` implicitly. For
        read-only tools (the ``tenxgraph`` CLI's read commands); the in-memory store has no
        schema and always passes.

        Raises:
            SchemaMissingError: ``STORAGE_SCHEMA_002`` when the tables are missing or older
                (``context``: ``found``, ``supported``): run ``setup()`` first.
            SchemaVersionError: ``STORAGE_SCHEMA_001`` when the stored schema is newer.
            StorageConnectionError: ``STORAGE_CONNECT_001`` when the server refuses for good.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the server cannot be reached.
        """
        source = getattr(self.store, "source", self.store)
        status = getattr(source, "aschema_status", None)
        if status is not None:
            found, supported = await status()
            if found is None or found < supported:
                where = "no tenxgraph tables" if found is None else f"schema version {found}"
                raise SchemaMissingError(
                    f"{source!r} holds {where}, this code uses version {supported}; run "
                    "setup() (or the tenxgraph setup command) first",
                    context={"found": found, "supported": supported},
                )
        self._setup_done = True

    def check_schema(self) -> None:
        """Sync twin of ``acheck_schema()`` (call it outside an event loop)."""
        run_sync(self.acheck_schema, sync_name="check_schema", async_name="acheck_schema")

    async def _ensure_setup(self) -> None:
        if not self._setup_done:
            await self.asetup()
            # Marked here too: an application's own asetup() does not know about the flag.
            self._setup_done = True

    async def aclose(self) -> None:
        """Release connections and pools. Idempotent: a second call does nothing; a later
        operation reopens what it needs."""
        if self.store is not None:
            await self.store.aclose()
        self._seen.clear()
        self._seen_bytes = 0
        self._setup_done = False

    def close(self) -> None:
        """Sync twin of ``aclose``."""
        run_sync(self.aclose, sync_name="close", async_name="aclose")

    async def arelease(self) -> None:
        """10xGraph's name for ``aclose``: release connections at shutdown (idempotent)."""
        await self.aclose()

    def release(self) -> None:
        """Sync twin of ``arelease`` (call it outside an event loop)."""
        run_sync(self.arelease, sync_name="release", async_name="arelease")

    async def __aenter__(self) -> Self:
        await self._ensure_setup()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- decoding --------------------------------------------------------------------------------
    def _remember(self, key: ThreadKey, loaded: Loaded | None) -> None:
        """Record (or, with ``None``, forget) the version this instance last saw of ``key``:
        its number and creation time only (see :class:`_Seen`)."""
        seen = self._seen
        if loaded is None:
            gone = seen.pop(key, None)
            if gone is not None:
                self._seen_bytes -= gone.nbytes
            return
        entry = seen.get(key)
        if entry is not None:  # the step path: update in place, no allocation
            entry.version = loaded.version
            entry.created_at = loaded.created_at
            seen.move_to_end(key)
            return
        nbytes = _seen_size(key)
        seen[key] = _Seen(loaded.version, loaded.created_at, nbytes)
        self._seen_bytes += nbytes
        while len(seen) > SEEN_MAX_THREADS or self._seen_bytes > SEEN_MAX_BYTES:
            self._seen_bytes -= seen.popitem(last=False)[1].nbytes

    def _forget(self, key: ThreadKey) -> None:
        """Forget the version remembered of ``key``."""
        self._remember(key, None)

    async def _seen_base(
        self, key: ThreadKey, seen: _Seen, state_cls: type[AgentState]
    ) -> Loaded | None:
        """The remembered checkpoint of ``key`` decoded from the in-process tier's copy (no
        round trip; its decoded messages are reused), or ``None`` when that tier no longer
        holds exactly that checkpoint (same version and creation time: a version number
        alone does not name a checkpoint)."""
        peek = getattr(self.store, "peek", None)
        if peek is None:
            return None
        rec = await peek(key)
        if rec is None or rec.version != seen.version or rec.created_at != seen.created_at:
            return None
        try:
            return self._decode(rec, state_cls)
        except (SerializationError, DecryptionError):
            return None

    def _decode(
        self,
        rec: StoredCheckpoint,
        state_cls: type[AgentState],
        memo: serde.MessageMemo | None = None,
        *,
        opened: bool = False,
    ) -> Loaded:
        """Decode ``rec`` through ``tenxgraph.storage.serde.decode_checkpoint`` (``memo``: the
        decoded message rows of the thread shared by one history call), after opening its
        sealed bytes when the checkpointer has a cipher (``opened``: the caller did already).

        Raises:
            SerializationError: ``STORAGE_SERIALIZATION_000`` naming the thread, the version and
                the JSONPath of what cannot be decoded.
            DecryptionError: ``STORAGE_CRYPTO_001`` when a sealed value does not open.
        """
        if self.cipher is not None:
            if not opened:
                rec = crypto.open_record(
                    self.cipher, rec, rec.decoded[1] if rec.decoded is not None else 0
                )
        else:
            crypto.refuse_without_cipher(rec)  # a 2-byte prefix check
        n: int
        base: list[Message]
        if rec.decoded is not None:
            objs, n = rec.decoded
            # The decoded objects cover the first ``n`` messages; a read that found the thread
            # only appended since (``read_since``) brings the rows after them: decode those.
            tail = rec.messages[n:] if rec.messages is not None else None
            values, more = serde.decode_checkpoint(
                state_cls, rec.values, tail, thread_id=rec.thread_id, version=rec.version
            )
            fresh = bool(more)
            if more:
                base = objs[:n]
                base.extend(more)
                n += len(more)
            else:
                # MessageList copies its items: slice only when the list grew past ``n``.
                base = objs if len(objs) == n else objs[:n]
        else:
            fresh = True
            values, base = serde.decode_checkpoint(
                state_cls,
                rec.values,
                rec.messages,
                thread_id=rec.thread_id,
                version=rec.version,
                seqs=(q for s, e in rec.ranges for q in range(s, e)) if memo is not None else None,
                memo=memo,
            )
            n = len(base)
        lineage = objs.lineage if not fresh and isinstance(objs, MessageList) else None
        msgs = MessageList(base, lineage=lineage)
        state = state_cls.model_construct(**values, context=msgs)
        view = DurableView(messages=msgs, length=n, ranges=rec.ranges, next_seq=rec.next_seq)
        return Loaded(state=state, version=rec.version, view=view, created_at=rec.created_at)

    async def _decode_or_refetch(
        self, key: ThreadKey, rec: StoredCheckpoint, state_cls: type[AgentState]
    ) -> Loaded | None:
        """Decode ``rec``; when that fails and the record may have come from a cache tier
        (well-formed JSON of the wrong shape), drop the thread from every cache and decode the
        source of truth's copy instead, so a corrupt cache entry is a miss, never an error.

        Raises:
            SerializationError: ``STORAGE_SERIALIZATION_000`` when the source's own copy cannot
                be decoded against ``state_cls`` (e.g. the state class changed incompatibly).
            DecryptionError: ``STORAGE_CRYPTO_001`` when the source's own copy does not open
                (a cached copy that does not open is dropped like a corrupt one).
        """
        try:
            return self._decode(rec, state_cls)
        except (SerializationError, DecryptionError) as exc:
            first = exc
        source = getattr(self.store, "source", None)
        invalidate = getattr(self.store, "invalidate", None)
        if source is not None and invalidate is not None:
            log.warning(
                "checkpoint of a thread could not be decoded (%s: %s at %s); dropping it from "
                "the caches and reading the source of truth",
                first.error_code,
                first.context.get("type") or first.context.get("reason"),
                first.context.get("path") or first.context.get("table"),
            )
            await invalidate(key)
            rec = await source.read(key)
            if rec is None:
                return None
            return self._decode(rec, state_cls)
        raise first

    # -- runtime API -----------------------------------------------------------------------------
    async def aload(
        self, config: dict[str, Any], state_cls: type[AgentState] | None = None
    ) -> Loaded | None:
        """Read and decode the latest version of the config's thread.

        Args:
            config: a validated run config (``thread_id``, ``user_id``).
            state_cls: the class to validate stored values against (default: the
                checkpointer's ``state_class``).

        Returns:
            A :class:`Loaded`, or ``None`` for a thread that does not exist (or is owned by
            another user). Sets ``config["_checkpoint_version"]`` (0 when missing).
        """
        await self._ensure_setup()
        key = self.key_for(config)
        if self.store is None:
            return await self._custom_load(config, key, state_cls)
        attrs = {ATTR.THREAD_ID: key.thread_id} if enabled() else None
        with span(SPAN.CHECKPOINT_LOAD, attributes=attrs) as sp:
            rec = await self.store.read(key)
            return await self._loaded(config, key, rec, state_cls, sp)

    async def _loaded(
        self,
        config: dict[str, Any],
        key: ThreadKey,
        rec: StoredCheckpoint | None,
        state_cls: type[AgentState] | None,
        sp: Any,
    ) -> Loaded | None:
        """Decode the record of a run's first read (``None``: no thread) and remember it; sets
        ``config["_checkpoint_version"]``."""
        assert self.store is not None
        if rec is None:
            config["_checkpoint_version"] = 0
            self._remember(key, None)
            return None
        decoded_before = rec.decoded
        loaded = await self._decode_or_refetch(key, rec, state_cls or self.state_class)
        if loaded is None:
            config["_checkpoint_version"] = 0
            self._remember(key, None)
            return None
        sp.set_attribute(ATTR.VERSION, loaded.version)
        if (
            decoded_before is None
            or decoded_before[1] != loaded.view.length
            or not isinstance(decoded_before[0], MessageList)
        ):
            # Keep what was just decoded beside the copy in the in-process tier, so the
            # next read of this version decodes nothing (a warm read stays flat in the
            # thread's length); a plain list is replaced by the MessageList built from it,
            # so the next read reuses its id index instead of building it again.
            attach = getattr(self.store, "attach_decoded", None)
            if attach is not None:
                await attach(key, loaded.version, (loaded.view.messages, loaded.view.length))
        config["_checkpoint_version"] = loaded.version
        self._remember(key, loaded)
        return loaded

    async def aload_leased(
        self,
        config: dict[str, Any],
        holder: str,
        *,
        queue: bool,
        state_cls: type[AgentState] | None = None,
    ) -> tuple[LeaseGrant, Loaded | None]:
        """One attempt to take the config's thread's run lease for ``holder`` (as
        :meth:`alease_acquire`) folded into the run's first read (as :meth:`aload`): on
        Postgres one statement, so taking the lease costs no round trip of its own.

        Args:
            config: a validated run config (``thread_id``, ``user_id``).
            holder: the run id.
            queue: keep the caller's place in the queue when refused.
            state_cls: the class to validate stored values against (default: the
                checkpointer's ``state_class``).

        Returns:
            ``(grant, loaded)``: ``loaded`` is the thread's latest version read under the
            granted lease (``None`` for a thread that does not exist yet, and when refused:
            then nothing was read). Sets ``config["_checkpoint_version"]`` when granted.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        await self._ensure_setup()
        key = self.key_for(config)
        store = self._tier("aload_leased")
        attrs = {ATTR.THREAD_ID: key.thread_id} if enabled() else None
        with span(SPAN.CHECKPOINT_LOAD, attributes=attrs) as sp:
            grant, rec = await store.lease_read(
                key,
                None,
                holder,
                ttl_s=self.lease_ttl_s,
                lapse_s=self.lease_ttl_s,
                queue=queue,
            )
            if grant.fence is None:
                return grant, None
            return grant, await self._loaded(config, key, rec, state_cls, sp)

    async def _custom_load(
        self, config: dict[str, Any], key: ThreadKey, state_cls: type[AgentState] | None
    ) -> Loaded | None:
        state = await self.aget_state(dict(config), state_cls or self.state_class)
        if state is None:
            config["_checkpoint_version"] = 0
            return None
        if not isinstance(state, AgentState):
            raise ValidationError(
                f"{type(self).__name__}.aget_state returned a {type(state).__name__}, not an "
                "AgentState",
                context={"field": "state"},
            )
        version = self._custom_versions.setdefault(key, 1)
        # The run extends its own copy of the message list, never the object the store holds.
        state = state.model_copy(update={"context": MessageList(list(state.context))})
        config["_checkpoint_version"] = version
        return Loaded(
            state=state, version=version, view=DurableView.empty(), created_at=time.time()
        )

    async def _custom_commit(
        self, config: dict[str, Any], key: ThreadKey, state: AgentState, prev: Loaded | None
    ) -> Loaded:
        await self.aput_state(dict(config), state)
        version = (prev.version if prev is not None else 0) + 1
        self._custom_versions[key] = version
        config["_checkpoint_version"] = version
        self._ckpt_counter.add(1, self._metric_attrs)
        return Loaded(
            state=state, version=version, view=DurableView.empty(), created_at=time.time()
        )

    def build_write(
        self, key: ThreadKey, state: AgentState, prev: Loaded | None
    ) -> tuple[CheckpointWrite, DurableView]:
        """Compute the compare-and-swap write of ``state`` on top of ``prev`` (no I/O).

        Raises:
            SerializationError: ``STORAGE_SERIALIZATION_000`` naming the path of a value that
                cannot be stored, or naming the thread and version when ``prev`` came from a
                damaged row (its version or message counter leaves no room for another write);
                nothing is written.
        """
        view = prev.view if prev is not None else DurableView.empty()
        msgs = state.context
        diff = diff_messages(view, msgs)
        if prev is not None and (prev.version >= _INT64_MAX or diff.next_seq > _INT64_MAX):
            raise SerializationError(
                f"the stored checkpoint of thread {key.thread_id!r} version {prev.version} is "
                "damaged (its version or message counter is beyond anything tenxgraph writes); "
                "restore the row, delete the thread, or read another version",
                context={
                    "thread_id": key.thread_id,
                    "version": prev.version,
                    "path": "$.version" if prev.version >= _INT64_MAX else "$.next_seq",
                    "type": "checkpoint",
                },
            )
        rows: list[tuple[int, bytes]] = []
        if diff.new:
            for i, (seq, msg) in enumerate(diff.new):
                if not isinstance(msg, Message):
                    raise ValidationError(
                        f"state.context holds a {type(msg).__name__}, not a Message",
                        context={"field": "context"},
                    )
                try:
                    rows.append((seq, serde.encode_message(msg)))
                except SerializationError:
                    # Encoded again with the message's JSONPath (built only now: a failure is
                    # rare), so the error names it; the first error if it somehow does not raise.
                    offset = len(msgs) - len(diff.new) if diff.appended_only else None
                    where = f"$.context[{offset + i}]" if offset is not None else "$.context[?]"
                    serde.encode_message(msg, where)
                    raise
        meta = state.execution_meta
        token = f"{meta.run_id or '-'}:{meta.step}:{os.urandom(16).hex()}"
        values = serde.encode_values(state, token=token)
        status = str(getattr(meta, "status", "running"))
        w = CheckpointWrite(
            thread_id=key.thread_id,
            user_id=key.user_id,
            expected_version=prev.version if prev is not None else 0,
            values=values,
            new_messages=rows,
            ranges=diff.ranges,
            next_seq=diff.next_seq,
            status=status,
            history_limit=self.state_history_limit,
            created_at=time.time(),
            token=token,
            base_created_at=prev.created_at if prev is not None and prev.version > 0 else None,
            decoded=(msgs, len(msgs)),
        )
        new_view = DurableView(
            messages=msgs, length=len(msgs), ranges=diff.ranges, next_seq=diff.next_seq
        )
        return w, new_view

    async def acommit(
        self,
        config: dict[str, Any],
        state: AgentState,
        prev: Loaded | None,
        *,
        fence: int | None = None,
        release: bool = False,
    ) -> Loaded:
        """Write ``state`` as the next version of the thread, compare-and-swap against ``prev``.

        Only messages new or changed since ``prev`` are written. On success
        ``config["_checkpoint_version"]`` is the new version. ``fence``: the run lease's
        fencing token (the write is refused once another run took the lease); ``release``:
        give that lease up in the same write (the run's last checkpoint).

        Raises:
            StaleStateError: ``STORAGE_CONFLICT_000``: the thread is no longer at
                ``prev.version`` (``context``: ``thread_id``, ``expected_version``,
                ``current_version``), or ``fence`` is stale (``context["fence"]``). Nothing
                was written; caches dropped the thread.
            CommitOutcomeUnknownError: ``STORAGE_COMMIT_UNKNOWN_001``: the connection broke
                after the write was sent and the outcome could not be read back; read the
                thread's version to find out (Postgres only).
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            SerializationError: ``STORAGE_SERIALIZATION_000`` before anything is written.
            TransientStorageError: ``STORAGE_TRANSIENT_001``: retryable; nothing was written.
        """
        if not self._setup_done:
            await self._ensure_setup()
        key = self.key_for(config)
        store = self.store
        if store is None:
            return await self._custom_commit(config, key, state, prev)
        w, view = self.build_write(key, state, prev)
        if fence is not None:
            w.fence, w.release = fence, release
        traced = enabled()
        attrs = None
        if traced:
            attrs = {
                ATTR.THREAD_ID: key.thread_id,
                ATTR.VERSION: w.expected_version + 1,
                ATTR.MESSAGES_WRITTEN: len(w.new_messages),
                ATTR.BYTES: len(w.values) + sum(len(b) for _, b in w.new_messages),
            }
        t0 = time.perf_counter()
        with span(SPAN.CHECKPOINT_COMMIT, attributes=attrs) if traced else NO_SPAN:
            try:
                rec = await store.write(w if self.cipher is None else self._sealed(w))
            except Exception as exc:
                code = getattr(exc, "error_code", None)
                if code == "STORAGE_CONFLICT_000":
                    self._conflicts.add(1, self._metric_attrs)
                if code in ("STORAGE_CONFLICT_000", "STORAGE_COMMIT_UNKNOWN_001"):
                    self._remember(key, None)
                self._write_hist.record(
                    time.perf_counter() - t0,
                    {**self._metric_attrs, ATTR.ERROR_TYPE: code or type(exc).__qualname__},
                )
                raise
        self._write_hist.record(time.perf_counter() - t0, self._metric_attrs)
        self._ckpt_counter.add(1, self._metric_attrs)
        # The record of a store that copies the write's ``decoded`` (``to_record``) brought the
        # decoded messages to the private cache tiers with the write-through: nothing to attach.
        attach = getattr(store, "attach_decoded", None) if rec.decoded is None else None
        if attach is not None:
            await attach(key, rec.version, (view.messages, view.length))
        config["_checkpoint_version"] = rec.version
        loaded = Loaded(state=state, version=rec.version, view=view, created_at=rec.created_at)
        self._remember(key, loaded)
        return loaded

    async def aledger_get(self, config: dict[str, Any], call_key: str) -> LedgerEntry | None:
        """The ledger entry recorded for ``call_key`` on the config's thread, or ``None``.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` for another user's thread; driver errors as
                ``TransientStorageError`` / ``StorageError`` (callers warn and run the tool).
        """
        await self._ensure_setup()
        if self.store is None:
            return self._custom_ledger.get((self.key_for(config), call_key))
        key = self.key_for(config)
        entry = await self.store.ledger_get(key, call_key)
        if entry is None or self.cipher is None:
            return entry
        return await self._open_ledger(key, entry)

    async def _open_ledger(self, key: ThreadKey, entry: LedgerEntry) -> LedgerEntry:
        """Open a sealed ledger row read for ``key``. A fork's ledger rows are the source's,
        copied inside the store still sealed for the source thread: a row that does not
        authenticate for ``key`` is tried for the thread the fork's metadata names as its
        source (``forked_from``, same user, up to :data:`FORK_LEDGER_HOPS` forks up), then
        refused.

        Raises:
            DecryptionError: ``STORAGE_CRYPTO_001`` when it opens for none of them.
        """
        assert self.cipher is not None and self.store is not None
        try:
            return crypto.open_ledger(self.cipher, key, entry)
        except DecryptionError as exc:
            if exc.context.get("reason") != "authentication":
                raise
            first = exc
        at = key
        for _ in range(FORK_LEDGER_HOPS):
            infos = await self.store.list_threads(key.user_id)
            meta = next((i.metadata for i in infos if i.thread_id == at.thread_id), None)
            src = (meta or {}).get("forked_from")
            if not isinstance(src, dict) or not isinstance(src.get("thread_id"), str):
                break
            at = ThreadKey(src["thread_id"], key.user_id)
            try:
                return crypto.open_ledger(self.cipher, at, entry)
            except DecryptionError:
                continue
        raise first

    async def aledger_put(self, config: dict[str, Any], entry: LedgerEntry) -> LedgerEntry:
        """Record a tool result durably; returns the winner when the key was already recorded.

        Raises:
            LedgerWriteError: ``STORAGE_LEDGER_001`` when the result could not be recorded.
            StorageError: ``STORAGE_FORBIDDEN_001`` for another user's thread.
        """
        await self._ensure_setup()
        if self.store is None:
            return self._custom_ledger.setdefault((self.key_for(config), entry.call_key), entry)
        key = self.key_for(config)
        if self.cipher is None:
            return await self.store.ledger_put(key, entry)
        winner = await self.store.ledger_put(key, crypto.seal_ledger(self.cipher, key, entry))
        return await self._open_ledger(key, winner)

    async def aledger_count(self, config: dict[str, Any]) -> int:
        """Number of ledger rows of the config's thread."""
        await self._ensure_setup()
        if self.store is None:
            key = self._key(config)
            return sum(1 for k, _ in self._custom_ledger if k == key)
        return await self.store.ledger_count(self._key(config))

    # -- run lease (runtime API; tenxgraph.core._lease decides, the store keeps it) ------------
    async def alease_acquire(
        self, config: dict[str, Any], holder: str, *, queue: bool
    ) -> LeaseGrant:
        """One attempt to take the config's thread's run lease for ``holder`` (a run id),
        lasting ``lease_ttl_s``; ``queue`` keeps the caller's place in the queue when refused
        (a place lapses ``lease_ttl_s`` after the caller's last attempt).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        await self._ensure_setup()
        return await self._tier("alease_acquire").lease_acquire(
            self.key_for(config),
            holder,
            ttl_s=self.lease_ttl_s,
            lapse_s=self.lease_ttl_s,
            queue=queue,
        )

    async def alease_waiter(
        self, config: dict[str, Any], holder: str, *, start: bool = True
    ) -> LeaseWaiter | None:
        """Register ``holder`` as waiting for the config's thread's lease, to be woken when
        it is released (:mod:`tenxgraph.storage._lease_wake`). Close the registration when
        done.

        Args:
            config: the run's validated config (its thread).
            holder: the waiting run's holder id.
            start: open the store's listening connection when this process has none yet
                (``False``: register only when it is already open).

        Returns:
            The registration; ``None`` when the store cannot wake waiters (memory, SQLite,
            ``lease_listen=False``) or, with ``start=False``, has not started listening.
        """
        waiter = getattr(self._tier("alease_waiter"), "lease_waiter", None)
        if waiter is None:
            return None
        return cast("LeaseWaiter | None", await waiter(self.key_for(config), holder, start=start))

    async def alease_peek(self, config: dict[str, Any], holder: str) -> LeaseGrant:
        """What an acquisition attempt would find, changing nothing (a queued run's poll)."""
        await self._ensure_setup()
        return await self._tier("alease_peek").lease_peek(
            self.key_for(config), holder, lapse_s=self.lease_ttl_s
        )

    async def alease_renew(self, config: dict[str, Any], holder: str, fence: int) -> bool:
        """Extend ``holder``'s lease by ``lease_ttl_s`` from now; ``False`` once another run
        took it over."""
        await self._ensure_setup()
        return await self._tier("alease_renew").lease_renew(
            self.key_for(config), holder, fence, self.lease_ttl_s
        )

    async def alease_release(self, config: dict[str, Any], holder: str, fence: int | None) -> None:
        """Give ``holder``'s lease of ``fence`` up (``None``: only leave the queue)."""
        await self._ensure_setup()
        await self._tier("alease_release").lease_release(self.key_for(config), holder, fence)

    async def aset_stop(
        self, config: dict[str, Any], requested: bool = True, at: float | None = None
    ) -> None:
        """Record (or, with ``requested=False``, withdraw) a durable stop request for the
        config's thread, made at ``at`` (UNIX seconds, default now). Recorded also before the
        thread's first checkpoint. Only a run that started at or before the request honours it
        (see ``docs/guarantees.md``).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        await self._ensure_setup()
        if self.store is None:
            key = self._key(config)
            if requested:
                self._custom_stops[key] = time.time() if at is None else at
            else:
                self._custom_stops.pop(key, None)
            return
        await self.store.set_stop(self._key(config), requested, at)

    async def aget_stop(self, config: dict[str, Any], since: float | None = None) -> bool:
        """Whether a stop is requested for the config's thread (at or after ``since``, UNIX
        seconds, when given: a run passes its start time).

        Raises:
            ConfigError: ``CONFIG_001`` for an invalid ``thread_id`` or ``user_id`` (the same
                validation as every other API).
        """
        await self._ensure_setup()
        key = self._key(config)
        if self.store is None:
            at = self._custom_stops.get(key)
            return at is not None and (since is None or at >= since)
        return await self.store.get_stop(key, since)

    # -- public state API (10xGraph names) -------------------------------------------------------
    async def aget_state(
        self, config: dict[str, Any], state_cls: type[AgentState] | None = None
    ) -> AgentState | None:
        """The latest state of the config's thread, or ``None`` when it does not exist (or is
        owned by another user, which reads exactly as missing).

        Raises:
            ConfigError: ``CONFIG_001`` for a missing or invalid ``thread_id``.
        """
        cfg = dict(config or {})
        normalize_config(cfg, new_run=False)
        loaded = await self.aload(cfg, state_cls)
        if config is not None and "_checkpoint_version" in cfg:
            config["_checkpoint_version"] = cfg["_checkpoint_version"]
        return loaded.state if loaded else None

    def get_state(
        self, config: dict[str, Any], state_cls: type[AgentState] | None = None
    ) -> AgentState | None:
        """Sync twin of :meth:`aget_state`."""
        return run_sync(
            self.aget_state, config, state_cls, sync_name="get_state", async_name="aget_state"
        )

    async def aput_state(self, config: dict[str, Any], state: AgentState) -> AgentState:
        """Write ``state`` as the thread's next version (compare-and-swap).

        The expected version is ``config["_checkpoint_version"]`` when present, else the version
        this checkpointer instance last read or wrote for the thread, else the thread's current
        version (read now). Returns ``state``.

        Raises:
            StaleStateError: ``STORAGE_CONFLICT_000`` when the thread moved on.
            StorageError: ``STORAGE_FORBIDDEN_001`` for another user's thread.
            SerializationError: ``STORAGE_SERIALIZATION_000`` before anything is written.
            ValidationError: ``VALIDATION_000`` when ``state`` is not an ``AgentState``.
        """
        if not isinstance(state, AgentState):
            raise ValidationError(
                f"aput_state expects an AgentState, got {type(state).__name__}",
                context={"field": "state"},
            )
        cfg = config if config is not None else {}
        normalize_config(cfg, new_run=False)
        key = self.key_for(cfg)
        prev = await self._base_for(cfg, key, type(state))
        await self.acommit(cfg, state, prev)
        return state

    def put_state(self, config: dict[str, Any], state: AgentState) -> AgentState:
        """Sync twin of :meth:`aput_state`."""
        return run_sync(
            self.aput_state, config, state, sync_name="put_state", async_name="aput_state"
        )

    async def _base_for(
        self, cfg: dict[str, Any], key: ThreadKey, state_cls: type[AgentState]
    ) -> Loaded | None:
        expected = cfg.get("_checkpoint_version")
        seen = self._seen.get(key)
        if expected is None:
            if seen is None:
                return await self.aload(cfg, state_cls)
            expected = seen.version
        if expected == 0:
            return None
        if seen is not None and seen.version == expected:
            base = await self._seen_base(key, seen, state_cls)
            if base is not None:
                return base
        rec = await self._tier("aput_state").read(key, int(expected))
        if rec is None:
            # The version is gone (pruned or never existed): the CAS must fail as stale.
            return Loaded(
                state=state_cls(), version=int(expected), view=DurableView.empty(), created_at=0
            )
        return self._decode(rec, state_cls)

    async def aget_state_history(
        self,
        config: dict[str, Any],
        limit: int | None = None,
        before: int | None = None,
        state_cls: type[AgentState] | None = None,
    ) -> list[StateSnapshot]:
        """Kept versions of the thread, newest first (like LangGraph's ``get_state_history``).

        Args:
            config: with ``thread_id`` (and ``user_id``).
            limit: at most this many snapshots (``None``: all kept).
            before: only versions strictly below this one.
            state_cls: class to decode with.

        Returns:
            ``StateSnapshot`` s, newest first; empty for a missing or foreign thread. Versions
            are read and decoded in pages of ``HISTORY_PAGE`` (a constant number of queries
            per page), so the raw rows of every kept version are never held at once. A version
            whose stored data cannot be decoded is left out and reported once per call (a
            warning and a ``tenxgraph.row.skipped`` span event); the others are returned.
            Each stored message row is decoded once per call, so the snapshots share the
            ``Message`` objects of the messages they have in common (messages are values).
            Like ``aget_state``, a call without ``before`` records the head version it saw
            in ``config["_checkpoint_version"]`` (the newest version listed, 0 for a missing
            thread; no extra query), so a following ``arewind(config, ...)`` is a
            compare-and-swap against the history the caller inspected; a call with
            ``before`` (a further page) leaves it as the first page set it.
        """
        await self._ensure_setup()
        key = self._key(config)
        if self.store is None:
            return await self._custom_history(config, key, limit, before, state_cls)
        if before is None and limit == 0:
            config["_checkpoint_version"] = await self.store.current_version(key) or 0
        cls = state_cls or self.state_class
        out: list[StateSnapshot] = []
        bad: list[SerializationError] = []
        remaining = limit
        below = before
        memo = serde.MessageMemo()  # each message row decoded once per call, not per version
        while remaining is None or remaining > 0:
            page = HISTORY_PAGE if remaining is None else min(HISTORY_PAGE, remaining)
            recs = await self.store.history(key, limit=page, before=below)
            if below is None and before is None:  # the first page starts at the head
                config["_checkpoint_version"] = recs[0].version if recs else 0
            for rec in recs:
                # a row that does not open is an error, not skipped
                if self.cipher is not None:
                    rec = crypto.open_record(self.cipher, rec)
                else:
                    crypto.refuse_without_cipher(rec)
                try:
                    loaded = self._decode(rec, cls, memo, opened=True)
                except SerializationError as exc:
                    bad.append(exc)
                    continue
                meta = loaded.state.execution_meta
                out.append(
                    StateSnapshot(
                        thread_id=rec.thread_id,
                        version=rec.version,
                        state=loaded.state,
                        status=rec.status,
                        next_node=meta.current_node if rec.status == "running" else None,
                        created_at=rec.created_at,
                        origin=_fork.origin_of(rec.values),
                    )
                )
            if remaining is not None:
                remaining -= len(recs)
            if len(recs) < page or not recs:
                break
            below = recs[-1].version
            del recs
        report_skipped("get_state_history", bad)
        return out

    async def _custom_history(
        self,
        config: dict[str, Any],
        key: ThreadKey,
        limit: int | None,
        before: int | None,
        state_cls: type[AgentState] | None,
    ) -> list[StateSnapshot]:
        """A checkpointer of the application's own keeps no history: its latest state only."""
        cfg = dict(config)
        state = await self.aget_state(cfg, state_cls or self.state_class)
        if "_checkpoint_version" in cfg:
            config["_checkpoint_version"] = cfg["_checkpoint_version"]
        version = self._custom_versions.get(key, 1)
        if state is None or limit == 0 or (before is not None and version >= before):
            return []
        meta = state.execution_meta
        status = str(getattr(meta, "status", "completed"))
        return [
            StateSnapshot(
                thread_id=key.thread_id,
                version=version,
                state=state,
                status=status,
                next_node=meta.current_node if status == "running" else None,
                created_at=time.time(),
            )
        ]

    def get_state_history(
        self, config: dict[str, Any], limit: int | None = None, before: int | None = None
    ) -> list[StateSnapshot]:
        """Sync twin of :meth:`aget_state_history`."""
        return run_sync(
            self.aget_state_history,
            config,
            limit,
            before,
            sync_name="get_state_history",
            async_name="aget_state_history",
        )

    async def aget_version(
        self, config: dict[str, Any], version: int, state_cls: type[AgentState] | None = None
    ) -> AgentState:
        """The state exactly as it was at ``version``; records the head version seen in
        ``config["_checkpoint_version"]`` (see :meth:`aload_version`).

        Raises:
            ValidationError: ``VALIDATION_000`` when ``version`` is not an ``int`` from 1 to
                ``2**63 - 1``, before any I/O.
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when that version is not kept (or the
                thread is another user's); ``context``: ``thread_id``, ``version``,
                ``oldest_kept``, ``latest`` (see :meth:`aload_version`).
            SerializationError: ``STORAGE_SERIALIZATION_000`` when that version's stored data
                cannot be decoded (``context``: ``thread_id``, ``version``, ``path``).
        """
        return (await self.aload_version(config, version, state_cls)).state

    async def aclean_thread(self, config: dict[str, Any]) -> bool:
        """Delete every version, message, ledger row and flag of the thread, and its
        state-cache entry (``aput_state_cache``).

        Returns:
            ``True`` when the thread existed.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` for another user's thread.
        """
        await self._ensure_setup()
        key = self._key(config)
        self._forget(key)
        existed = await self._tier("aclean_thread").delete_thread(key)
        # The thread's state-cache entry goes with it (after the owner check above passed).
        # The thread is already deleted: a cache that cannot be reached now must not report
        # the delete as failed (a caller would retry a delete that happened).
        try:
            await self.cache_values.kv_delete(_STATE_CACHE_NS, self._state_cache_key(config))
        except TransientStorageError as exc:
            log.warning(
                "thread %r was deleted, but its state-cache entry could not be removed (%s); "
                "it expires with the cache TTL",
                key.thread_id,
                exc.error_code,
            )
        return existed

    def clean_thread(self, config: dict[str, Any]) -> bool:
        """Sync twin of :meth:`aclean_thread`."""
        return run_sync(
            self.aclean_thread, config, sync_name="clean_thread", async_name="aclean_thread"
        )

    async def aclear_state(self, config: dict[str, Any]) -> bool:
        """10xGraph name for deleting a thread's persisted state: same as :meth:`aclean_thread`."""
        return await self.aclean_thread(config)

    def clear_state(self, config: dict[str, Any]) -> bool:
        """Sync twin of :meth:`aclear_state`."""
        return run_sync(
            self.aclear_state, config, sync_name="clear_state", async_name="aclear_state"
        )

    async def alist_threads(
        self,
        config: dict[str, Any] | None = None,
        search: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> list[ThreadInfo]:
        """Threads owned by the config's ``user_id``, most recently updated first.

        With ``{"user_id": ADMIN_SCOPE}`` (an application's explicit opt-in, see
        ``ADMIN_SCOPE``) every user's threads are listed; each ``ThreadInfo.user_id`` names
        the owner to pass to the per-thread APIs.

        Args:
            config: ``{"user_id": ...}`` (``thread_id`` not needed); a missing or ``None``
                ``user_id`` is ``"anonymous"``, as for writes.
            search: keep threads whose id contains this substring.
            offset: number of leading items to skip (``None``: none).
            limit: at most this many items (``None``: all).

        Returns:
            The threads; one whose stored metadata cannot be decoded is left out and reported
            once per call (a warning and a ``tenxgraph.row.skipped`` span event).

        Raises:
            ConfigError: ``CONFIG_001`` for ``user_id="*"`` or another invalid user id.
        """
        await self._ensure_setup()
        cfg = dict(config or {})
        sub = cfg.get("configurable")
        uid = cfg.get("user_id", sub.get("user_id") if isinstance(sub, dict) else None)
        if uid is ADMIN_SCOPE or not self.enforce_user_isolation:
            user = "*"
        else:
            # Validated like any config (LangGraph's configurable user_id included; "*",
            # empty and non-text ids refused; None means "anonymous" as for writes).
            normalize_config(cfg, require_thread=False, new_run=False)
            user = str(cfg.get("user_id") or "anonymous")
        threads = await self._tier("alist_threads").list_threads(
            user, limit=None if search else limit, offset=0 if search else (offset or 0)
        )
        if search:
            threads = [t for t in threads if search in t.thread_id]
            start = offset or 0
            threads = threads[start : start + limit if limit else None]
        return threads

    def list_threads(
        self,
        config: dict[str, Any] | None = None,
        search: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> list[ThreadInfo]:
        """Sync twin of :meth:`alist_threads`."""
        return run_sync(
            self.alist_threads,
            config,
            search,
            offset,
            limit,
            sync_name="list_threads",
            async_name="alist_threads",
        )

    async def aget_thread(self, config: dict[str, Any]) -> ThreadInfo | None:
        """The :class:`ThreadInfo` of the config's thread, or ``None`` (missing or foreign)."""
        await self._ensure_setup()
        key = self._key(config)
        for info in await self._tier("aget_thread").list_threads(key.user_id):
            if info.thread_id == key.thread_id:
                return info
        return None

    def get_thread(self, config: dict[str, Any]) -> ThreadInfo | None:
        """Sync twin of :meth:`aget_thread`."""
        return run_sync(self.aget_thread, config, sync_name="get_thread", async_name="aget_thread")

    async def aput_thread(
        self, config: dict[str, Any], thread_info: dict[str, Any] | ThreadInfo
    ) -> None:
        """Set the application metadata of an existing thread.

        Args:
            thread_info: a dict of JSON-compatible metadata, or a :class:`ThreadInfo` whose
                ``metadata`` is taken.

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when the thread has no checkpoint yet.
            StorageError: ``STORAGE_FORBIDDEN_001`` for another user's thread.
            SerializationError: ``STORAGE_SERIALIZATION_000`` when metadata is not JSON data.
        """
        await self._ensure_setup()
        meta = thread_info.metadata if isinstance(thread_info, ThreadInfo) else dict(thread_info)
        try:
            orjson.dumps(meta)
        except TypeError as exc:
            raise SerializationError(
                f"thread metadata must be JSON data: {exc}", context={"path": "$"}
            ) from None
        await self._tier("aput_thread").set_thread_metadata(self._key(config), meta)

    def put_thread(self, config: dict[str, Any], thread_info: dict[str, Any] | ThreadInfo) -> None:
        """Sync twin of :meth:`aput_thread`."""
        run_sync(
            self.aput_thread, config, thread_info, sync_name="put_thread", async_name="aput_thread"
        )

    async def alist_messages(
        self,
        config: dict[str, Any],
        search: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """Messages of the thread's latest state, oldest first.

        Args:
            search: keep messages whose text contains this substring (case-insensitive).
            offset: number of leading items to skip (``None``: none).
            limit: at most this many items (``None``: all).
        """
        state = await self.aget_state(config)
        msgs: Sequence[Message] = state.context if state is not None else []
        if search:
            needle = search.lower()
            msgs = [m for m in msgs if needle in m.text().lower()]
        start = offset or 0
        return list(msgs[start : start + limit if limit is not None else None])

    def list_messages(
        self,
        config: dict[str, Any],
        search: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """Sync twin of :meth:`alist_messages`."""
        return run_sync(
            self.alist_messages,
            config,
            search,
            offset,
            limit,
            sync_name="list_messages",
            async_name="alist_messages",
        )

    async def aget_message(self, config: dict[str, Any], message_id: str | int) -> Message:
        """One message of the thread's latest state by id.

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when no such message.
        """
        state = await self.aget_state(config)
        for m in state.context if state is not None else []:
            if m.message_id == message_id:
                return m
        raise ResourceNotFoundError(
            f"no message {message_id!r} in thread {config.get('thread_id')!r}",
            context={"thread_id": config.get("thread_id"), "message_id": message_id},
        )

    def get_message(self, config: dict[str, Any], message_id: str | int) -> Message:
        """Sync twin of :meth:`aget_message`."""
        return run_sync(
            self.aget_message,
            config,
            message_id,
            sync_name="get_message",
            async_name="aget_message",
        )

    async def aput_messages(
        self,
        config: dict[str, Any],
        messages: list[Message],
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Append messages to the thread as a new version (compare-and-swap, like
        :meth:`aput_state`); messages whose id is already present are skipped.

        Raises:
            StaleStateError, StorageError, SerializationError: as :meth:`aput_state`.
        """
        from tenxgraph.core.state.reducers import add_messages

        cfg = config if config is not None else {}
        normalize_config(cfg, new_run=False)
        key = self.key_for(cfg)
        prev = await self._base_for(cfg, key, self.state_class)
        base = prev.state if prev is not None else self.state_class()
        new_state = base.model_copy(update={"context": add_messages(base.context, list(messages))})
        await self.acommit(cfg, new_state, prev)

    def put_messages(
        self,
        config: dict[str, Any],
        messages: list[Message],
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Sync twin of :meth:`aput_messages`."""
        run_sync(
            self.aput_messages,
            config,
            messages,
            metadata,
            sync_name="put_messages",
            async_name="aput_messages",
        )

    async def adelete_message(self, config: dict[str, Any], message_id: str | int) -> bool:
        """Remove one message from the thread's state as a new version (history keeps it).

        Returns:
            ``True`` when the message existed.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` for another user's thread (also when the
                message does not exist there).
        """
        from tenxgraph.core.state.reducers import replace_messages

        cfg = config if config is not None else {}
        normalize_config(cfg, new_run=False)
        key = self.key_for(cfg)
        prev = await self._base_for(cfg, key, self.state_class)
        if prev is None:
            # Missing, or another user's thread (which reads as missing): the ledger probe
            # refuses a non-owner, as every other write does.
            await self.aledger_count(cfg)
            return False
        kept = [m for m in prev.state.context if m.message_id != message_id]
        if len(kept) == len(prev.state.context):
            return False
        new_state = prev.state.model_copy(update={"context": replace_messages(None, kept)})
        await self.acommit(cfg, new_state, prev)
        return True

    def delete_message(self, config: dict[str, Any], message_id: str | int) -> bool:
        """Sync twin of :meth:`adelete_message`."""
        return run_sync(
            self.adelete_message,
            config,
            message_id,
            sync_name="delete_message",
            async_name="adelete_message",
        )

    # -- 10xGraph reference names (checkpointers reference page) ---------------------------------
    async def aget_messages(
        self,
        config: dict[str, Any],
        search: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """The reference page's name for ``alist_messages`` (same arguments and result)."""
        return await self.alist_messages(config, search, offset, limit)

    def get_messages(
        self,
        config: dict[str, Any],
        search: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """Sync twin of ``aget_messages``."""
        return run_sync(
            self.aget_messages,
            config,
            search,
            offset,
            limit,
            sync_name="get_messages",
            async_name="aget_messages",
        )

    async def aget_threads(
        self,
        config: dict[str, Any] | None = None,
        search: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> list[ThreadInfo]:
        """The reference page's name for ``alist_threads`` (same arguments and result)."""
        return await self.alist_threads(config, search, offset, limit)

    def get_threads(
        self,
        config: dict[str, Any] | None = None,
        search: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> list[ThreadInfo]:
        """Sync twin of ``aget_threads``."""
        return run_sync(
            self.aget_threads,
            config,
            search,
            offset,
            limit,
            sync_name="get_threads",
            async_name="aget_threads",
        )

    async def adelete_thread(self, config: dict[str, Any]) -> bool:
        """The reference page's name for ``aclean_thread``: delete every version, message,
        ledger row and flag of the thread. Returns ``True`` when it existed.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` for another user's thread.
        """
        return await self.aclean_thread(config)

    def delete_thread(self, config: dict[str, Any]) -> bool:
        """Sync twin of ``adelete_thread``."""
        return run_sync(
            self.adelete_thread, config, sync_name="delete_thread", async_name="adelete_thread"
        )

    # -- generic cache values and the state cache -------------------------------------------------
    async def aput_cache_value(
        self, namespace: str, key: str, value: Any, ttl_seconds: float | None = None
    ) -> None:
        """Store an application value in the checkpointer's cache tier (Redis for a
        ``PgCheckpointer`` with Redis, else this process; the database file for
        ``SqliteCheckpointer``). Not part of any thread and never read by a run.

        Args:
            namespace: a non-empty str grouping keys (``"llm-cache"``); names starting with
                ``"__tenxgraph"`` are reserved.
            key: a non-empty str.
            value: JSON data, or any value tenxgraph's stores can encode (datetimes, UUIDs,
                bytes ... come back with their type; Pydantic models come back as dicts).
            ttl_seconds: expiry in seconds; ``None`` (default) never expires.

        Raises:
            ValidationError: ``VALIDATION_000`` for an empty or reserved namespace, an empty
                key, or a ``ttl_seconds`` that is not a positive number.
            SerializationError: ``STORAGE_SERIALIZATION_000`` for a value that cannot be
                encoded (``context["path"]``).
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the tier could not store it.
        """
        ns = self._check_namespace(namespace)
        k = _check_cache_name("key", key)
        ttl = _check_ttl(ttl_seconds)
        data = serde.dumps(value)
        await self._ensure_setup()
        await self.cache_values.kv_put(ns, k, data, ttl)

    def put_cache_value(
        self, namespace: str, key: str, value: Any, ttl_seconds: float | None = None
    ) -> None:
        """Sync twin of ``aput_cache_value``."""
        run_sync(
            self.aput_cache_value,
            namespace,
            key,
            value,
            ttl_seconds,
            sync_name="put_cache_value",
            async_name="aput_cache_value",
        )

    async def aget_cache_value(self, namespace: str, key: str) -> Any | None:
        """The value stored by ``aput_cache_value``, or ``None`` when missing or expired.

        Raises:
            ValidationError: ``VALIDATION_000`` for an empty or reserved namespace or key.
        """
        ns = self._check_namespace(namespace)
        k = _check_cache_name("key", key)
        await self._ensure_setup()
        raw = await self.cache_values.kv_get(ns, k)
        return None if raw is None else serde.loads(raw)

    def get_cache_value(self, namespace: str, key: str) -> Any | None:
        """Sync twin of ``aget_cache_value``."""
        return run_sync(
            self.aget_cache_value,
            namespace,
            key,
            sync_name="get_cache_value",
            async_name="aget_cache_value",
        )

    async def aclear_cache_value(self, namespace: str, key: str) -> bool:
        """Delete one cache value.

        Returns:
            ``True`` when a live (unexpired) value was there.

        Raises:
            ValidationError: ``VALIDATION_000`` for an empty or reserved namespace or key.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the tier could not delete it.
        """
        ns = self._check_namespace(namespace)
        k = _check_cache_name("key", key)
        await self._ensure_setup()
        return await self.cache_values.kv_delete(ns, k)

    def clear_cache_value(self, namespace: str, key: str) -> bool:
        """Sync twin of ``aclear_cache_value``."""
        return run_sync(
            self.aclear_cache_value,
            namespace,
            key,
            sync_name="clear_cache_value",
            async_name="aclear_cache_value",
        )

    async def alist_cache_keys(self, namespace: str, prefix: str | None = None) -> list[str]:
        """Live keys of ``namespace`` that start with ``prefix`` (all when ``None``), sorted.

        Raises:
            ValidationError: ``VALIDATION_000`` for an empty or reserved namespace.
        """
        ns = self._check_namespace(namespace)
        if prefix is not None and not isinstance(prefix, str):
            raise ValidationError("prefix must be a str or None", context={"field": "prefix"})
        await self._ensure_setup()
        return await self.cache_values.kv_keys(ns, prefix)

    def list_cache_keys(self, namespace: str, prefix: str | None = None) -> list[str]:
        """Sync twin of ``alist_cache_keys``."""
        return run_sync(
            self.alist_cache_keys,
            namespace,
            prefix,
            sync_name="list_cache_keys",
            async_name="alist_cache_keys",
        )

    @staticmethod
    def _check_namespace(namespace: Any) -> str:
        ns = _check_cache_name("namespace", namespace)
        if ns.startswith(_RESERVED_NS):
            raise ValidationError(
                f"cache namespaces starting with {_RESERVED_NS!r} are reserved",
                context={"field": "namespace"},
            )
        return ns

    def _state_cache_key(self, config: dict[str, Any] | None) -> str:
        key = self._key(config)
        # Owner and thread, unambiguously joined: another user never reads this entry.
        return orjson.dumps([key.user_id, key.thread_id]).decode()

    async def aput_state_cache(self, config: dict[str, Any], state: AgentState) -> AgentState:
        """Write ``state`` to the thread's fast cache entry (10xGraph's "realtime" state), in
        the cache tier (Redis for ``PgCheckpointer`` with Redis, else this process; the
        database file for ``SqliteCheckpointer``). Not a checkpoint: no version is written and
        a run never reads it; the durable state stays where ``aput_state`` and runs put it.
        Scoped by owner like every other read. Expires after ``state_cache_ttl_s`` (Postgres:
        ``cache_ttl``; others: never).

        Returns:
            ``state``.

        Raises:
            ValidationError: ``VALIDATION_000`` when ``state`` is not an ``AgentState``.
            ConfigError: ``CONFIG_001`` for a missing or invalid ``thread_id``.
            SerializationError: ``STORAGE_SERIALIZATION_000`` for a value that cannot be encoded.
        """
        if not isinstance(state, AgentState):
            raise ValidationError(
                f"aput_state_cache expects an AgentState, got {type(state).__name__}",
                context={"field": "state"},
            )
        key = self._state_cache_key(config)
        values = serde.encode_values(state)
        msgs = [serde.encode_message(m, f"$.context[{i}]") for i, m in enumerate(state.context)]
        blob = len(values).to_bytes(8, "big") + values + b"[" + b",".join(msgs) + b"]"
        if self.cipher is not None:
            k = self._key(config)
            blob = crypto.seal_blob(self.cipher, "state_cache", k.user_id, k.thread_id, blob)
        await self._ensure_setup()
        await self.cache_values.kv_put(_STATE_CACHE_NS, key, blob, self.state_cache_ttl_s)
        return state

    def put_state_cache(self, config: dict[str, Any], state: AgentState) -> AgentState:
        """Sync twin of ``aput_state_cache``."""
        return run_sync(
            self.aput_state_cache,
            config,
            state,
            sync_name="put_state_cache",
            async_name="aput_state_cache",
        )

    async def aget_state_cache(
        self, config: dict[str, Any], state_cls: type[AgentState] | None = None
    ) -> AgentState | None:
        """The state last written by ``aput_state_cache`` for the config's thread and
        user, or ``None`` (missing, expired, or undecodable against the state class, which is
        logged and dropped).

        Raises:
            ConfigError: ``CONFIG_001`` for a missing or invalid ``thread_id``.
        """
        key = self._state_cache_key(config)
        await self._ensure_setup()
        blob = await self.cache_values.kv_get(_STATE_CACHE_NS, key)
        if blob is None:
            return None
        cls = state_cls or self.state_class
        try:
            if self.cipher is not None:
                k = self._key(config)
                blob = crypto.open_blob(self.cipher, "state_cache", k.user_id, k.thread_id, blob)
            n = int.from_bytes(blob[:8], "big")
            values = serde.decode_values(cls, blob[8 : 8 + n])
            msgs = [Message.model_validate(m) for m in serde.loads(blob[8 + n :])]
            return cls.model_construct(**values, context=MessageList(msgs))
        except Exception as exc:  # noqa: BLE001 - a cache entry that does not decode is a miss
            log.warning("state cache entry could not be decoded (%s): dropped", type(exc).__name__)
            await self.cache_values.kv_delete(_STATE_CACHE_NS, key)
            return None

    def get_state_cache(self, config: dict[str, Any]) -> AgentState | None:
        """Sync twin of ``aget_state_cache``."""
        return run_sync(
            self.aget_state_cache,
            config,
            sync_name="get_state_cache",
            async_name="aget_state_cache",
        )

    # -- key rotation (docs/how-to/encryption.md; the driver is tenxgraph.storage._rotate) ------
    async def arotate_keys(
        self,
        *,
        batch: int = 500,
        min_age_s: float = 10.0,
        seal_plaintext: bool = False,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> _rotate.RotationReport:
        """Re-seal every stored row still sealed under another key than its owner's active key
        (state values, message rows, ledger results, background-run inputs and results), in
        batches, online: concurrent runs and workers neither fail nor lose a compare-and-swap
        (see :mod:`tenxgraph.storage._rotate`).
        Resumable: run it again after a stop. What ``tenxgraph rotate-keys`` runs.

        Args:
            batch: rows per round trip (1 to 100,000).
            min_age_s: checkpoints younger than this many seconds are left for a later run
                (``0``: none).
            seal_plaintext: also seal rows written before the store had a cipher.
            progress: ``(table, resealed, scanned)`` after each batch.

        Returns:
            A :class:`~tenxgraph.storage._rotate.RotationReport` (rows re-sealed, left behind,
            unreadable, per table).

        Raises:
            ConfigError: ``CONFIG_001`` when the checkpointer has no cipher, or for a bad
                ``batch`` / ``min_age_s``.
            StorageError: ``STORAGE_000`` for a checkpointer of the application's own.
        """
        if self.cipher is None:
            raise ConfigError(
                "rotate_keys needs a checkpointer built with cipher=Keyring(...)",
                context={"key": "cipher"},
            )
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 100_000:
            raise ConfigError(
                f"batch must be an int from 1 to 100000, got {batch!r}", context={"key": "batch"}
            )
        if not isinstance(min_age_s, (int, float)) or not math.isfinite(min_age_s) or min_age_s < 0:
            raise ConfigError(
                f"min_age_s must be a finite number >= 0, got {min_age_s!r}",
                context={"key": "min_age_s"},
            )
        store = self._tier("arotate_keys")
        await self._ensure_setup()
        source: Any = getattr(store, "source", store)
        return await _rotate.rotate(
            source,
            self.cipher,
            batch=batch,
            min_age_s=float(min_age_s),
            seal_plaintext=seal_plaintext,
            progress=progress,
        )

    def rotate_keys(
        self, *, batch: int = 500, min_age_s: float = 10.0, seal_plaintext: bool = False
    ) -> _rotate.RotationReport:
        """Sync twin of :meth:`arotate_keys`."""
        return run_sync(
            self.arotate_keys,
            sync_name="rotate_keys",
            async_name="arotate_keys",
            batch=batch,
            min_age_s=min_age_s,
            seal_plaintext=seal_plaintext,
        )

    # -- time travel (docs/how-to/time-travel.md; pure pieces in tenxgraph.storage._fork) ------
    async def aload_version(
        self, config: dict[str, Any], version: int, state_cls: type[AgentState] | None = None
    ) -> Loaded:
        """Read and decode kept version ``version`` of the config's thread.

        Like ``aget_state`` it records the head version it saw in
        ``config["_checkpoint_version"]`` (0 for a missing thread), read before the version,
        so a following ``arewind(config, ...)`` is a compare-and-swap against the head the
        caller inspected.

        Raises:
            ValidationError: ``VALIDATION_000`` when ``version`` is not an ``int`` from 1 to
                ``2**63 - 1``, before any I/O.
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when that version is not kept
                (pruned, not written yet, or the thread is missing or another user's);
                ``context``: ``thread_id``, ``version``, ``oldest_kept``, ``latest``.
            SerializationError: ``STORAGE_SERIALIZATION_000`` when its stored data cannot be
                decoded.
        """
        _fork.check_version(version)
        key = self._key(config)
        await self._ensure_setup()
        head = await self._tier("aload_version").current_version(key)
        rec = await self._read_version(key, version)
        config["_checkpoint_version"] = head or 0
        return self._decode(rec, state_cls or self.state_class)

    async def _read_version(
        self, key: ThreadKey, version: int, *, with_messages: bool = True
    ) -> StoredCheckpoint:
        """The stored record of kept version ``version`` (``version_missing`` when not)."""
        _fork.check_version(version)
        await self._ensure_setup()
        store = self._tier("aload_version")
        rec = await store.read(key, version, with_messages=with_messages)
        if rec is None:
            kept = await store.kept_versions(key)
            raise _fork.version_missing(key.thread_id, version, *(kept or (None, None)))
        return rec

    async def arewind(
        self, config: dict[str, Any], to_version: int, state_cls: type[AgentState] | None = None
    ) -> Loaded:
        """Write a new head version of the config's thread whose state is kept version
        ``to_version`` (history keeps every version; no message row is written).

        A compare-and-swap against the head the caller read: ``config["_checkpoint_version"]``
        when set (a run's or an earlier read's: ``aget_state``, ``aload_version``,
        ``aget_state_history``), else the head read now. Sets
        ``config["_checkpoint_version"]`` to the new head. It does not wait for a run that
        holds the thread's lease: such a run's next checkpoint then fails its own
        compare-and-swap.

        Raises:
            ValidationError: ``VALIDATION_000`` when ``to_version`` is not an ``int`` from 1 to
                ``2**63 - 1``, before any I/O.
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when ``to_version`` is not kept.
            StaleStateError: ``STORAGE_CONFLICT_000`` when the thread moved past the head the
                caller read (a concurrent rewind or run won); nothing was written and
                ``config["_checkpoint_version"]`` is removed, so calling again compares
                against the head read then.
            StorageError: ``STORAGE_FORBIDDEN_001`` for another user's thread (a read of it,
                ``aload_version``, finds nothing instead).
        """
        _fork.check_version(to_version, "to_version")
        normalize_config(config, new_run=False)
        key = self.key_for(config)
        store = self._tier("arewind")
        try:
            return await self._rewind(config, key, store, to_version, state_cls)
        except StaleStateError as exc:
            # The caller's pin is what lost: drop it, so the next call reads the head afresh
            # (a pin kept here would make every retry fail the same way).
            config.pop("_checkpoint_version", None)
            raise _fork.rewind_lost(exc, to_version) from None

    async def _rewind(
        self,
        config: dict[str, Any],
        key: ThreadKey,
        store: StoreTier,
        to_version: int,
        state_cls: type[AgentState] | None,
    ) -> Loaded:
        """The body of :meth:`arewind` (its ``StaleStateError`` is rewritten there)."""
        try:
            rec = await self._read_version(key, to_version)
        except ResourceNotFoundError:
            # Another user's thread reads as missing, but a write to it is refused as
            # forbidden (DESIGN 3): the ledger lookup checks ownership and reads nothing.
            await store.ledger_get(key, "")
            raise
        if self.cipher is not None:
            rec = crypto.open_record(self.cipher, rec)
        target = self._decode(rec, state_cls or self.state_class, opened=True)
        expected = config.get("_checkpoint_version")
        head = await store.read(
            key, None if expected is None else int(expected), with_messages=False
        )
        if head is None:
            raise stale(key.thread_id, int(expected or 0), await store.current_version(key))
        state = target.state
        token = f"rewind:{to_version}:{os.urandom(16).hex()}"
        w = CheckpointWrite(
            thread_id=key.thread_id,
            user_id=key.user_id,
            expected_version=head.version,
            values=_fork.restamp(rec.values, token, {"op": "rewind", "version": to_version}),
            new_messages=[],
            ranges=target.view.ranges,
            next_seq=max(head.next_seq, target.view.next_seq),
            status=rec.status,
            history_limit=self.state_history_limit,
            created_at=time.time(),
            token=token,
            base_created_at=head.created_at,
            decoded=(state.context, target.view.length),
        )
        view = DurableView(state.context, target.view.length, w.ranges, w.next_seq)
        written = await self._write_travel(store.write(self._sealed(w)), key)
        config["_checkpoint_version"] = written.version
        return await self._adopt(key, written, state, view)

    async def afork(
        self,
        config: dict[str, Any],
        at_version: int,
        to_thread_id: str,
        *,
        state_cls: type[AgentState] | None = None,
        edit: Callable[[AgentState], AgentState] | None = None,
    ) -> dict[str, Any]:
        """Create thread ``to_thread_id`` (same user) whose version 1 is kept version
        ``at_version`` of the config's thread, edited by ``edit`` when given.

        The message rows are copied inside the store (one ``INSERT ... SELECT`` on SQLite and
        Postgres; shared bytes in memory): without ``edit`` no message is read, decoded or
        encoded by this process (the version's metadata only), with ``edit`` the version is
        decoded and only the messages the edit added or changed are encoded. The source's
        ledger rows are copied (a replayed tool call is answered as on the source); the
        fork's metadata and version record ``forked_from`` (thread and version). The source
        is not changed.

        Returns:
            The fork's config: ``{"thread_id": to_thread_id, "user_id": the caller's}``.

        Raises:
            ConfigError: ``CONFIG_001`` for an invalid ``to_thread_id``.
            ValidationError: ``VALIDATION_000`` when ``at_version`` is not an ``int`` from 1 to
                ``2**63 - 1``, or ``to_thread_id`` is the source thread, before any I/O.
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when ``at_version`` is not kept.
            StaleStateError: ``STORAGE_CONFLICT_000`` when thread ``to_thread_id`` exists.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns ``to_thread_id``.
            SerializationError: ``STORAGE_SERIALIZATION_000`` before anything is written.
        """
        _fork.check_version(at_version, "at_version")
        normalize_config(config, new_run=False)
        key = self.key_for(config)
        out: dict[str, Any] = {"thread_id": to_thread_id, "user_id": config["user_id"]}
        dst_cfg = dict(out)
        normalize_config(dst_cfg, new_run=False)
        out["thread_id"] = dst_cfg["thread_id"]
        dst = self.key_for(dst_cfg)
        if dst.thread_id == key.thread_id:
            raise _fork.fork_into_source(key.thread_id)
        store = self._tier("afork")
        origin = {"op": "fork", "thread_id": key.thread_id, "version": at_version}
        meta = serde.dumps({"forked_from": {"thread_id": key.thread_id, "version": at_version}})
        sealed = self.cipher is not None
        rec = await self._read_version(key, at_version, with_messages=sealed and edit is None)
        if edit is None:
            # The stored values are kept as they are (fields the state class does not declare
            # included); the rows are the version's own. Sealed rows are bound to their
            # thread: under a cipher the fork's are opened and sealed again for it (no row is
            # shared with the source), else they are copied inside the store.
            if self.cipher is not None:
                rec = crypto.open_record(self.cipher, rec)
            token = f"fork:{key.thread_id}:{at_version}:{os.urandom(16).hex()}"
            w = CheckpointWrite(
                thread_id=dst.thread_id,
                user_id=dst.user_id,
                expected_version=0,
                values=_fork.restamp(rec.values, token, origin),
                new_messages=(
                    list(zip(expand_ranges(rec.ranges), rec.messages or (), strict=True))
                    if sealed
                    else []
                ),
                ranges=rec.ranges,
                next_seq=rec.next_seq,
                status=rec.status,
                history_limit=None,
                created_at=time.time(),
                token=token,
            )
            copy = () if sealed else rec.ranges
            await self._write_travel(store.fork(key, at_version, self._sealed(w), copy, meta), dst)
            self._remember(dst, None)
            return out
        # The head (the usual fork point) comes decoded from the in-process tier when warm;
        # another version is read with its messages and decoded.
        head = await self.aload(dict(config), state_cls)
        if head is not None and head.version == at_version and head.created_at == rec.created_at:
            base = head
        else:
            full = await self._read_version(key, at_version)
            base = self._decode(full, state_cls or self.state_class)
        state = edit(base.state)
        if self.cipher is not None:
            # Nothing is shared with the source: every message is the fork's own row.
            base = Loaded(base.state, base.version, DurableView.empty(), base.created_at)
        w, view = self.build_write(dst, state, base)
        w.expected_version, w.base_created_at = 0, None
        w.values = _fork.with_origin(w.values, origin)
        copy = () if self.cipher is not None else _fork.clip_ranges(w.ranges, base.view.next_seq)
        forked = await self._write_travel(
            store.fork(key, at_version, self._sealed(w), copy, meta), dst
        )
        await self._adopt(dst, forked, state, view)
        return out

    def _sealed(self, w: CheckpointWrite) -> CheckpointWrite:
        """``w`` sealed by the cipher (``w`` itself without one)."""
        return w if self.cipher is None else crypto.seal_write(self.cipher, w)

    async def _write_travel(
        self, write: Awaitable[StoredCheckpoint], key: ThreadKey
    ) -> StoredCheckpoint:
        """Await a rewind's or fork's store write (counted as a checkpoint); a conflict is
        counted and the thread forgotten."""
        try:
            rec = await write
        except StorageError as exc:
            if exc.error_code == "STORAGE_CONFLICT_000":
                self._conflicts.add(1, self._metric_attrs)
                self._remember(key, None)
            raise
        self._ckpt_counter.add(1, self._metric_attrs)
        return rec

    async def _adopt(
        self, key: ThreadKey, rec: StoredCheckpoint, state: AgentState, view: DurableView
    ) -> Loaded:
        """Remember a time-travel write's new head, with its decoded messages attached to the
        in-process cache tier (as ``acommit`` does)."""
        attach = getattr(self.store, "attach_decoded", None) if rec.decoded is None else None
        if attach is not None:
            await attach(key, rec.version, (view.messages, view.length))
        loaded = Loaded(state=state, version=rec.version, view=view, created_at=rec.created_at)
        self._remember(key, loaded)
        return loaded

    def __repr__(self) -> str:
        name = self.store.name if self.store is not None else None
        return (
            f"{type(self).__name__}(store={name!r}, state_history_limit={self.state_history_limit})"
        )
