"""Redis cache tier: each thread's latest checkpoint, shared by every application instance.

The middle tier of the layered store (``LRU -> Redis -> source of truth``, see
``docs/architecture.md``), on the redis-py asyncio client. Redis is never authoritative: every
failure (server down, a call slower than ``timeout_s``, data that does not parse) is a cache
miss, logged as a warning on the ``tenxgraph.redis`` logger and recorded as a span event
(``tenxgraph.cache.failure``), never an error for the run.

Key layout, format ``"2"`` (every key of a thread shares one hash tag, so the layout works on
Redis Cluster):

* ``{prefix}{<thread_id>}:meta``: a hash with ``fmt`` (layout version, ``"2"``), ``owner`` (a
  digest of the owner's ``user_id``), ``version``, ``values``, ``ranges`` (JSON list of
  ``[start, end)`` pairs), ``next_seq``, ``status``, ``created_at`` (UNIX seconds);
* ``{prefix}{<thread_id>}:msgs``: one string, the message rows of the cached version in list
  order joined by ``,`` (so ``[`` + it + ``]`` is a JSON array);
* ``{prefix}{<thread_id>}:lens``: one string, the byte length of each row, comma-separated.

Every key expires ``ttl_s`` seconds after the thread's last write. Reads and writes are single
Lua scripts (one round trip, atomic): a read fetches the meta and the two strings, and the
client frames the rows by their lengths and decodes them all in one pydantic-core call
(:func:`~tenxgraph.storage.serde.decode_message_array`; rows that call cannot decide alone are
left to the checkpointer's row-by-row decoding, so a garbage row is a miss, never an error). A
write-through sends only the new rows and applies them only on top of the cached version they
follow (else it drops the thread's keys): an append-only step ``APPEND``s them, a step that
changed or removed messages rebuilds both strings from the cached rows and the new ones. A copy
never replaces a newer cached version. Keys of another format read as garbage (a miss; deleted).

Nothing read from this tier is relied on unconfirmed: :class:`~tenxgraph.storage.layered.
LayeredStore` asks the source of truth, in the run's one conditional read (``READ_SINCE``),
whether the copy is still the latest, so a write-through that was lost, late or never made (a
writer without Redis, a crash between the commit and the write-through) makes a copy old, never
a read wrong.

When Redis fails for connection reasons (a lost or refused connection, a timeout, a Redis
Cluster that is down or reconfiguring, or any non-Redis exception out of the client) the tier
marks itself down for ``reconnect_backoff_s`` seconds (calls are misses without touching the network) and a
background probe retries every ``reconnect_backoff_s``: the tier reconnects by itself when
Redis is back, even when idle. Threads whose write-through or invalidation could not reach
Redis are remembered and their keys deleted first thing after reconnection, so data Redis kept
through the outage cannot be served stale.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import hashlib
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    ClusterError,
    RedisClusterException,
    RedisError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tenxgraph._redact import secret_candidates
from tenxgraph._url_check import url_problem
from tenxgraph.core.exceptions import (
    ConfigError,
    StorageConnectionError,
    redact,
)
from tenxgraph.records import (
    Range,
    StoredCheckpoint,
    ThreadKey,
    expand_ranges,
    ranges_extend,
    ranges_len,
    tail_seqs,
)
from tenxgraph.telemetry import ATTR, EVENT, METRIC, SPAN, SpanKind, counter, enabled, span

from . import serde
from ._cache_mac import CHAIN_BYTES, Chain, EntryMac
from ._tasks import cancel_guards, start_guard

__all__ = ["RedisCache", "auth_error"]

logger = logging.getLogger("tenxgraph.redis")

#: Layout version written in every meta hash; anything else reads as garbage (``"1"``: the
#: messages in a hash ``seq -> row``; ``"2"``: one string of the rows and one of their lengths;
#: ``"3"``: format 2 plus ``mac``, the entry's keyed tag).
_FMT = "3"
_FMT_B = _FMT.encode()

#: At most this many bytes of hash chains (see :class:`~tenxgraph.storage._cache_mac.Chain`)
#: are kept per tier (about 4,000 threads); the least recently used are dropped first.
CHAIN_MAX_BYTES = 4 << 20

#: At most this many threads are remembered for deletion after an outage.
_MAX_DIRTY = 10_000

#: Default seconds an erasure marker lives (:meth:`RedisCache.erase`): longer than any
#: write-back can stay queued (a background update waits at most for the calls queued before
#: it, each bounded by ``timeout_s``).
ERASE_MARKER_S = 600.0

#: Threads per pipelined round trip of :meth:`RedisCache.erase`.
_ERASE_CHUNK = 500

#: Hash slots of a Redis Cluster.
_SLOTS = 16384
_SLOT_TAGS: list[str] = []
_SLOT_TAGS_LOCK = threading.Lock()


def _slot_tag(slot: int) -> str:
    """A short hash tag whose Redis Cluster slot is ``slot`` (CRC16/XMODEM of the tag, as
    Redis computes it); the table of all 16,384 is built once per process (about 170,000
    CRCs of short strings)."""
    with _SLOT_TAGS_LOCK:
        if not _SLOT_TAGS:
            table: list[str | None] = [None] * _SLOTS
            missing, i = _SLOTS, 0
            while missing:
                text = format(i, "x")
                s = binascii.crc_hqx(text.encode(), 0) % _SLOTS
                if table[s] is None:
                    table[s] = text
                    missing -= 1
                i += 1
            _SLOT_TAGS.extend(t for t in table if t is not None)
        return _SLOT_TAGS[slot]


#: Errors meaning "Redis cannot serve now", not "Redis answered something we cannot use":
#: connection and timeout failures, and a Redis Cluster that is down, failing over or
#: reconfiguring (``ClusterDownError`` and ``MasterDownError`` are ``ClusterError``s;
#: ``SlotNotCoveredError`` is a ``RedisClusterException``; ``AskError`` / ``MovedError``
#: escape only when the redirections never settle). They mark the tier down (backoff, one
#: warning per outage, counted as ``failures``).
_UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    TimeoutError,
    OSError,
    ClusterError,
    TryAgainError,
    AskError,
    RedisClusterException,
)

# KEYS: meta, msgs, lens. ARGV: 1 owner digest, 2 fmt.
# Returns the entry, false (nothing for this owner) or 0 (garbage, deleted). The rows are
# returned as they are stored: one string of the rows joined by ',' and one of their lengths;
# the client checks that they frame each other and match the ranges.
_GET_LUA = """
local function garbage()
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return 0
end
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return false end
if t ~= 'hash' then return garbage() end
local m = redis.call('HMGET', KEYS[1], 'fmt', 'owner', 'version', 'values', 'ranges',
                     'next_seq', 'status', 'created_at', 'mac')
if m[1] ~= ARGV[2] then return garbage() end
for i = 2, 9 do if not m[i] then return garbage() end end
if m[2] ~= ARGV[1] then return false end
if not tonumber(m[3]) or not tonumber(m[6]) or not tonumber(m[8]) then return garbage() end
local mt = redis.call('TYPE', KEYS[2])['ok']
local lt = redis.call('TYPE', KEYS[3])['ok']
if (mt ~= 'string' and mt ~= 'none') or (lt ~= 'string' and lt ~= 'none') then
  return garbage()
end
local body = redis.call('GET', KEYS[2]) or ''
local lens = redis.call('GET', KEYS[3]) or ''
return {m[3], m[4], m[5], m[6], m[7], m[8], lens, body, m[9]}
"""

# KEYS: meta, msgs, lens
# ARGV: 1 mode ('inc' | 'full' | 'drop'), 2 version, 3 owner, 4 values, 5 ranges JSON,
#       6 next_seq, 7 status, 8 created_at, 9 ttl_s, 10 fmt, 11 row seqs "s1,s2,...",
#       12 row lengths "n1,n2,...", 13 the rows joined by ',', 14 created_at of the version
#       the 'inc' rows apply to ('' unknown: not checked), 15 that version's number,
#       16 the new entry's tag, 17 the tag of the entry the 'inc' rows apply to.
# A version number alone does not name a checkpoint (a thread deleted and created anew counts
# from 1 again), and a copy in Redis may have been altered: rows extend the cached copy only
# when it is that version created at that time *and* carries the tag the writer computed for
# it (so the strings it appends to are the ones its tag covers), and only when they append
# (the cached ranges extend to the new ones and the rows are exactly the seqs added, in
# order): they are then APPENDed to both strings. Anything else drops the copy (the writer
# sends the complete record instead). A complete record replaces any copy but a newer version
# or this very entry (same version, creation time and tag).
# KEYS[4] is the thread's erasure marker (RedisCache.erase): while it exists, nothing of the
# thread is written (a late write-back of an erased thread, from any instance, is ignored).
# Returns 1 applied, 2 data dropped (the rows do not apply on top of what is cached),
# 0 ignored (a newer version, or this very entry, is cached; or the thread was erased).
_PUT_LUA = """
if redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
local mode, v, owner, ttl = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[9])
local row_seqs, row_lens = {}, {}
for x in string.gmatch(ARGV[11], '[^,]+') do row_seqs[#row_seqs + 1] = tonumber(x) end
local total = 0
for x in string.gmatch(ARGV[12], '[^,]+') do
  local n = tonumber(x)
  row_lens[#row_lens + 1] = n
  total = total + n
end
if #row_seqs > 0 then total = total + #row_seqs - 1 end
if #row_seqs ~= #row_lens or total ~= #ARGV[13] then
  return redis.error_reply('tenxgraph: malformed rows')
end
local cv, co, cr, cc, cm = nil, nil, nil, nil, nil
if redis.call('TYPE', KEYS[1])['ok'] == 'hash' then
  local m = redis.call('HMGET', KEYS[1], 'version', 'owner', 'ranges', 'fmt', 'created_at',
                       'mac')
  if m[4] == ARGV[10] then cv, co, cr, cc, cm = tonumber(m[1]), m[2], m[3], m[5], m[6] end
end
local mt = redis.call('TYPE', KEYS[2])['ok']
local lt = redis.call('TYPE', KEYS[3])['ok']
if (mt ~= 'string' and mt ~= 'none') or (lt ~= 'string' and lt ~= 'none') then cv = nil end
if cv and co == owner then
  if cv > v or (cv == v and cc == ARGV[8] and cm == ARGV[16]) then return 0 end
end

local function set_meta()
  redis.call('HSET', KEYS[1], 'fmt', ARGV[10], 'owner', owner, 'version', ARGV[2],
             'values', ARGV[4], 'ranges', ARGV[5], 'next_seq', ARGV[6], 'status', ARGV[7],
             'created_at', ARGV[8], 'mac', ARGV[16])
end
local function valid_ranges(r)
  if type(r) ~= 'table' then return false end
  for i = 1, #r do
    if type(r[i]) ~= 'table' or type(r[i][1]) ~= 'number' or type(r[i][2]) ~= 'number'
       or r[i][2] < r[i][1] then
      return false
    end
  end
  return true
end
-- the seqs 'new' adds after 'old' when it only appends to it, else nil
local function appended(old, new)
  local n = #old
  local out = {}
  if n > 0 then
    if #new < n then return nil end
    for i = 1, n - 1 do
      if old[i][1] ~= new[i][1] or old[i][2] ~= new[i][2] then return nil end
    end
    if old[n][1] ~= new[n][1] or new[n][2] < old[n][2] then return nil end
    for seq = old[n][2], new[n][2] - 1 do out[#out + 1] = seq end
  end
  for i = n + 1, #new do
    for seq = new[i][1], new[i][2] - 1 do out[#out + 1] = seq end
  end
  return out
end
local function same_seqs(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local applied = false
if mode == 'inc' and cv and co == owner and cv == tonumber(ARGV[15])
   and (ARGV[14] == '' or cc == ARGV[14]) and cm == ARGV[17] then
  local ok1, old = pcall(cjson.decode, cr)
  local ok2, new = pcall(cjson.decode, ARGV[5])
  if ok1 and ok2 and valid_ranges(old) and valid_ranges(new) then
    local tail = appended(old, new)
    if tail and same_seqs(tail, row_seqs) then
      if #row_seqs > 0 then
        local sep = ''
        if redis.call('STRLEN', KEYS[3]) > 0 then sep = ',' end
        redis.call('APPEND', KEYS[2], sep .. ARGV[13])
        redis.call('APPEND', KEYS[3], sep .. ARGV[12])
      end
      set_meta()
      applied = true
    end
  end
elseif mode == 'full' then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  if #row_seqs > 0 then
    redis.call('SET', KEYS[2], ARGV[13])
    redis.call('SET', KEYS[3], ARGV[12])
  end
  set_meta()
  applied = true
end
if applied then
  for k = 1, 3 do redis.call('EXPIRE', KEYS[k], ttl) end
  return 1
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return 2
"""


_PROCESS_KEY: list[bytes] = []
_PROCESS_KEY_LOCK = threading.Lock()


def _process_key() -> bytes:
    """A random MAC key drawn once per process (tiers given no key share it)."""
    with _PROCESS_KEY_LOCK:
        if not _PROCESS_KEY:
            _PROCESS_KEY.append(os.urandom(32))
        return _PROCESS_KEY[0]


class _Unavailable(Exception):
    """Internal: the tier is down (backing off) or a call failed at the connection level."""


class _Garbage(Exception):
    """Internal: Redis answered with data that does not parse as this layout."""


class _Rejected(Exception):
    """Internal: an entry that parses but whose tag does not verify (altered or corrupted)."""


def _owner(user_id: str) -> str:
    """The owner digest stored in Redis (never the raw ``user_id``)."""
    return hashlib.blake2b(user_id.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _parse_ranges(raw: bytes) -> tuple[Range, ...]:
    """The ``ranges`` field (JSON ``[[start, end], ...]``) as a tuple.

    Raises:
        ValueError: the field is not a list of ``[start, end]`` integer pairs.
    """
    data = orjson.loads(raw)
    out = []
    for r in data:
        s, e = r
        if type(s) is not int or type(e) is not int or e < s:
            raise ValueError("bad range")
        out.append((s, e))
    return tuple(out)


def _split(lens_b: bytes, body: bytes) -> list[bytes]:
    """The rows of ``body`` (rows joined by ``,``) framed by the comma-separated lengths
    ``lens_b``, as the thread's ``msgs`` and ``lens`` strings hold them.

    Raises:
        ValueError: the lengths do not frame ``body`` exactly.
    """
    out: list[bytes] = []
    if not lens_b:
        if body:
            raise ValueError("unframed bytes")
        return out
    off = 0
    append = out.append
    for n in map(int, lens_b.split(b",")):
        end = off + n
        if n < 2 or end > len(body):
            raise ValueError("frame length")
        append(body[off:end])
        off = end + 1
    if off != len(body) + 1:
        raise ValueError("frame length")
    return out


def _looks_like_blob(b: Any) -> bool:
    """Cheap sanity check of a cached message blob: bytes holding a JSON object."""
    return type(b) is bytes and b[:1] == b"{" and b[-1:] == b"}"


#: Redis replies (lower case) meaning the credentials were refused.
_AUTH_REPLIES = ("noauth", "wrongpass", "invalid username-password pair", "invalid password")


def auth_error(exc: BaseException, where: str) -> StorageConnectionError | None:
    """The permanent error for a Redis failure that says the credentials were refused.

    Args:
        exc: what a Redis call raised (``redis.exceptions.AuthenticationError``, a
            ``ResponseError`` starting ``NOAUTH`` / ``WRONGPASS``, anything else).
        where: the server, already redacted, for the message.

    Returns:
        A ``StorageConnectionError`` (``STORAGE_CONNECT_001``, ``context["reason"] ==
        "password"``, ``context["backend"] == "redis"``) when retrying cannot help because
        the password (or user) is wrong or missing; ``None`` for any other failure.
    """
    from redis.exceptions import AuthenticationError

    text = " ".join(str(exc).split()).lower()
    if not isinstance(exc, AuthenticationError) and not any(r in text for r in _AUTH_REPLIES):
        return None
    return StorageConnectionError(
        f"Redis at {where} refused the credentials: the password (or user) in the Redis URL is "
        "wrong or missing; fix it in the URL",
        context={"backend": "redis", "reason": "password", "target": where},
    )


class RedisCache:
    """Shared cache tier on Redis (redis-py asyncio); see the module docs for the key layout.

    Implements :class:`~tenxgraph.storage.base.CacheTier` (``name == "redis"``). The owner
    scope is part of every check: a ``get`` by another user is a miss.

    Args:
        url: a Redis URL (``redis://[:password@]host:6379/0``, ``rediss://``, ``unix://``).
            Ignored when ``client`` is given. Passwords never appear in logs or spans.
        client: an existing ``redis.asyncio.Redis`` (it must return bytes, i.e.
            ``decode_responses=False``); the caller keeps ownership and closes it. Like every
            redis-py asyncio client it belongs to the event loop it is first used on.
        client_kwargs: extra keyword arguments for the clients created from ``url``
            (``redis.asyncio.Redis.from_url``, e.g. ``max_connections``).
        prefix: prepended to every key; must not contain ``{`` or ``}`` (the hash tag is the
            thread id). Default ``"tenxgraph:"``.
        ttl_s: every key of a thread expires this many seconds after its last write
            (default 86400, one day).
        timeout_s: a call taking longer than this many seconds (connecting included) is
            abandoned and counts as a failure (default 2.0).
        reconnect_backoff_s: after a connection-level failure, calls are misses without
            touching the network for this many seconds, and a background probe retries every
            this many seconds until Redis answers (default 1.0).
        cluster: ``url`` names one node of a Redis Cluster: the tier then uses
            ``redis.asyncio.cluster.RedisCluster``, which discovers the other nodes and sends
            each call to the master of its slot (every key of a thread is in one slot, see the
            key layout). A ``RedisCluster`` can also be passed as ``client``. A master that
            fails, or a cluster that is down or reconfiguring, is a cache failure with backoff
            like a lost connection; :meth:`acheck` refuses a ``url`` that is not a cluster.
        mac_key: the secret (``bytes``, at least 16, e.g. ``os.urandom(32)``) of the keyed
            MAC every entry carries (see :mod:`tenxgraph.storage._cache_mac`): an entry is
            served only when its tag verifies, so a copy altered in Redis (state values, a
            message's text or role, their order or number, version and creation time kept
            or not) is rejected, never served. Every instance sharing the entries needs the
            same key; Redis never sees it.
        mac_key_loader: instead of ``mac_key``, an async callable returning it, awaited once
            on first use (``PgCheckpointer`` passes the key kept in Postgres). While it
            fails, calls are misses. With neither, a random key drawn once per process:
            entries are then readable by the tiers of this process only (other processes
            reject them, counted as ``rejected``).
        chain_max_bytes: memory (bytes) for the hash states that let an append-only
            write-through be tagged at the cost of its new rows (least recently used first
            out; a thread without one is sent complete). Default :data:`CHAIN_MAX_BYTES`.

    Raises:
        ConfigError: (``CONFIG_001``) neither ``url`` nor ``client`` given, a ``url`` whose
            user-info cannot be told from its host (an unencoded ``@``, ``/``, ``?``, ``#`` or
            space in the password: redis-py would silently connect to another server), a
            ``prefix`` with braces, or a non-positive ``ttl_s`` / ``timeout_s`` / negative
            backoff; ``mac_key`` not bytes or shorter than 16, or given with
            ``mac_key_loader``.

    Attributes:
        name: ``"redis"`` (telemetry tier name).
        shared: ``True``: every instance writes through it, so its hits need no validation.
        coalesces: ``True``: :meth:`put` takes ``base_version``, so the layered store may
            merge the write-throughs of several consecutive versions into one call.
    """

    name = "redis"
    shared = True
    coalesces = True

    def __init__(
        self,
        url: str | None = None,
        *,
        client: aioredis.Redis | RedisCluster | None = None,
        prefix: str = "tenxgraph:",
        ttl_s: int = 86400,
        timeout_s: float = 2.0,
        reconnect_backoff_s: float = 1.0,
        cluster: bool = False,
        client_kwargs: dict[str, Any] | None = None,
        mac_key: bytes | None = None,
        mac_key_loader: Callable[[], Awaitable[bytes]] | None = None,
        chain_max_bytes: int = CHAIN_MAX_BYTES,
    ) -> None:
        if mac_key is not None and mac_key_loader is not None:
            raise ConfigError(
                "give RedisCache mac_key= or mac_key_loader=, not both",
                context={"key": "cache_mac_key"},
            )
        self._mac: EntryMac | None = EntryMac(mac_key) if mac_key is not None else None
        if mac_key is None and mac_key_loader is None:
            self._mac = EntryMac(_process_key())
        self._mac_loader = mac_key_loader
        self._chains: OrderedDict[str, Chain] = OrderedDict()
        self._chain_bytes = 0
        self.chain_max_bytes = max(0, int(chain_max_bytes))
        self._chain_lock = threading.Lock()
        if client is None and not url:
            raise ConfigError("RedisCache needs url= or client=", context={"key": "url"})
        problem = url_problem(url) if client is None and url else None
        if problem:
            raise ConfigError(f"cannot use the Redis URL: {problem}", context={"key": "url"})
        if "{" in prefix or "}" in prefix:
            raise ConfigError(
                "the Redis key prefix must not contain '{' or '}': the thread id is the hash tag",
                context={"key": "prefix"},
            )
        if cluster and client is not None:
            raise ConfigError(
                "cluster=True builds a client from url=; pass a RedisCluster as client= instead",
                context={"key": "cluster"},
            )
        if ttl_s < 1 or timeout_s <= 0 or reconnect_backoff_s < 0:
            raise ConfigError(
                "RedisCache needs ttl_s >= 1, timeout_s > 0 and reconnect_backoff_s >= 0",
                context={"key": "ttl_s"},
            )
        self._owns_client = client is None
        self._url = url
        self._factory: type[aioredis.Redis] | type[RedisCluster] = (
            RedisCluster if cluster else aioredis.Redis
        )
        self._client_kwargs: dict[str, Any] = {
            "socket_timeout": timeout_s,
            "socket_connect_timeout": timeout_s,
            # One immediate retry of a call whose connection was found closed (a connection
            # Redis or the network dropped, seen as ConnectionError when it is next used or
            # while it connects); never after a timeout, so a Redis that does not answer costs
            # one ``timeout_s``. Repeating a call is safe: reads and deletes are idempotent and
            # a write-through applied twice drops the copy (a miss), never a wrong one.
            "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            **(client_kwargs or {}),
        }
        # A client created from ``url`` per event loop (redis-py connections belong to the loop
        # that opened them): a second ``asyncio.run`` or the sync API's portal loop gets its
        # own, closed when that loop shuts down (see _LoopClient).
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClient] = (
            weakref.WeakKeyDictionary()
        )
        # collected without aclose(): each loop's client is closed on its own loop
        weakref.finalize(self, cancel_guards, self._loops).atexit = False
        if client is None:
            assert url is not None
            client = self._factory.from_url(url, **self._client_kwargs)
        self._given: aioredis.Redis | RedisCluster = client
        self.prefix = prefix
        self.ttl_s = int(ttl_s)
        #: seconds an erasure marker lives (see :meth:`erase`)
        self.erase_marker_s = ERASE_MARKER_S
        self.timeout_s = float(timeout_s)
        self.reconnect_backoff_s = float(reconnect_backoff_s)
        kw = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {}) or {}
        self._where = (
            redact(url, secret_candidates(url))
            if url
            else f"{kw.get('host', '?')}:{kw.get('port', '?')}"
        )
        self._server_attrs: dict[str, Any] = {ATTR.DB_SYSTEM: "redis"}
        if "host" in kw:
            self._server_attrs[ATTR.SERVER_ADDRESS] = str(kw["host"])
        if "port" in kw:
            self._server_attrs[ATTR.SERVER_PORT] = int(kw["port"])
        self._given_scripts = _Scripts(client)
        self._get_script = self._script("get")
        self._put_script = self._script("put")
        self._down_until = 0.0
        self._down = False
        self._probe: asyncio.Task[None] | None = None
        self._dirty: set[str] = set()
        self._dirty_overflow = False
        self._closed = False
        self._given_used = False
        self._stats = {
            "hits": 0,
            "misses": 0,
            "failures": 0,
            "writes": 0,
            "garbage": 0,
            "rejected": 0,
        }

    def __repr__(self) -> str:
        return f"RedisCache({self._where!r}, prefix={self.prefix!r})"

    # ------------------------------------------------------------------ clients per loop

    def _entry(self) -> _LoopClient | None:
        """The running loop's client and scripts (created on first use), or ``None`` when the
        application's client is used."""
        if not self._owns_client:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        entry = self._loops.get(loop)
        if entry is None:
            for old in [lp for lp in list(self._loops) if lp.is_closed()]:
                self._loops.pop(old, None)
            if not self._loops and not self._given_used:
                client = self._given  # the client built in __init__ serves the first loop
                self._given_used = True
            else:
                assert self._url is not None  # the tier owns its clients only when given a url
                client = self._factory.from_url(self._url, **self._client_kwargs)
            entry = _LoopClient(client, _Scripts(client))
            entry.guard = start_guard(
                loop, _close_on_loop_shutdown(client), "tenxgraph-redis-client"
            )
            self._loops[loop] = entry
        return entry

    @property
    def _client(self) -> aioredis.Redis | RedisCluster:
        entry = self._entry()
        return self._given if entry is None else entry.client

    def _script(self, name: str) -> Any:
        """A callable ``(keys, args)`` running script ``name`` on the running loop's client."""

        async def call(keys: Any = None, args: Any = None) -> Any:
            entry = self._entry()
            scripts = self._given_scripts if entry is None else entry.scripts
            return await getattr(scripts, name)(keys, args)

        return call

    # ------------------------------------------------------------------ keys

    def _tag(self, thread_id: str) -> str:
        """The thread's hash tag: the id itself, or a SHA-256 digest of it when the id holds a
        ``}`` or is empty (Redis Cluster would then hash each key on its own)."""
        if thread_id and "}" not in thread_id and "{" not in thread_id:
            return thread_id
        return "h:" + hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()

    def keys(self, thread_id: str) -> tuple[str, str, str]:
        """The thread's ``(meta, msgs, lens)`` keys; all share one hash tag (:meth:`_tag`)."""
        base = f"{self.prefix}{{{self._tag(thread_id)}}}:"
        return base + "meta", base + "msgs", base + "lens"

    def _marker_key(self, thread_id: str, mac: EntryMac) -> str:
        """The key of the thread's erasure marker: in the slot of the thread's keys (a Redis
        Cluster runs a script only over keys of one slot) without the thread id in its name
        (a tag of that slot, and the keyed digest :meth:`EntryMac.marker`)."""
        if self._cluster_client():
            tag = _slot_tag(binascii.crc_hqx(self._tag(thread_id).encode(), 0) % _SLOTS)
        else:
            tag = "erased"
        return f"{self.prefix}{{{tag}}}:erased:{mac.marker(thread_id)}"

    def _cluster_client(self) -> bool:
        return isinstance(self._client, RedisCluster)

    async def erase(
        self, thread_ids: list[str] | tuple[str, ...], owner: str | None = None
    ) -> int | None:
        """Delete the keys of ``thread_ids`` and leave, per thread, an erasure marker that
        lives :attr:`erase_marker_s` seconds: while it exists the put script ignores any
        write of the thread, so a write-back queued before the erasure (a read fill or a
        write-through of another instance) cannot bring the thread's data back. The marker
        holds no data; its name is a keyed digest, never the thread id.

        Args:
            thread_ids: the erased threads (any owner scope).
            owner: accepted for the tier protocol; the thread ids name every key.

        Returns:
            The number of threads whose keys existed, or ``None`` when Redis could not be
            reached: the threads are then remembered and their keys deleted first thing once
            Redis answers again (never served meanwhile: the source no longer confirms them).
        """
        found = 0
        for tid in thread_ids:
            self._drop_chain(tid)
        with self._span(SPAN.CACHE_INVALIDATE, "", "DEL"):
            try:
                mac = await self._entry_mac()
                px = max(1, int(self.erase_marker_s * 1000))
                for start in range(0, len(thread_ids), _ERASE_CHUNK):
                    chunk = thread_ids[start : start + _ERASE_CHUNK]
                    found += await self._call(self._erase_chunk, chunk, mac, px)
            except (_Unavailable, RedisError, ValueError, TypeError, UnicodeError):
                for tid in thread_ids:
                    self._mark_dirty(tid)
                return None
        return found

    async def _erase_chunk(
        self, thread_ids: list[str] | tuple[str, ...], mac: EntryMac, px: int
    ) -> int:
        """One pipelined round trip: marker and ``DEL`` of each thread; threads found."""
        async with self._client.pipeline(transaction=False) as pipe:
            for tid in thread_ids:
                pipe.set(self._marker_key(tid, mac), b"1", px=px)
                pipe.delete(*self.keys(tid))
            res = await pipe.execute()
        return sum(1 for n in res[1::2] if n)

    # ------------------------------------------------------------------ CacheTier

    async def get(self, key: ThreadKey) -> StoredCheckpoint | None:
        """The cached latest checkpoint of ``key`` with its messages, in one round trip.

        Args:
            key: the thread and the caller's owner scope.

        Returns:
            The record (``messages`` complete, in list order), or ``None`` on a miss: nothing
            cached, another owner's entry, Redis down or slow, unparseable data, or an entry
            whose tag does not verify (altered or corrupted: counted as
            ``tenxgraph.cache.rejected``, a warning and a span event); the keys of the last
            two are deleted. Never raises for a Redis problem.
        """
        tid = key.thread_id
        with self._span(SPAN.CHECKPOINT_READ, key.thread_id, "EVALSHA") as sp:
            rec = None
            try:
                mac = await self._entry_mac()
                res = await self._call(
                    self._get_script, list(self.keys(tid)), [_owner(key.user_id), _FMT]
                )
                rec = self._parse(key, res, mac)
            except _Unavailable as exc:
                self._failure(sp, exc, key.thread_id)
            except _Garbage as exc:
                self._garbage(sp, key.thread_id, str(exc))
                await self._delete_quietly(key.thread_id)
            except _Rejected:
                self._rejected(sp, key.thread_id)
                await self._delete_quietly(key.thread_id)
            except (RedisError, ValueError, TypeError, UnicodeError) as exc:
                self._garbage(sp, key.thread_id, type(exc).__name__)
            hit = rec is not None
            self._stats["hits" if hit else "misses"] += 1
            counter(METRIC.CACHE_HITS if hit else METRIC.CACHE_MISSES).add(
                1, {ATTR.TIER: self.name}
            )
            if sp.is_recording():
                sp.set_attribute(ATTR.HIT, hit)
                if rec is not None:
                    sp.set_attribute(ATTR.VERSION, rec.version)
                    sp.set_attribute(
                        ATTR.BYTES, len(rec.values) + sum(map(len, rec.messages or ()))
                    )
            return rec

    async def put(
        self,
        record: StoredCheckpoint,
        new_messages: list[tuple[int, bytes]] | None = None,
        base_created_at: float | None = None,
        *,
        base_version: int | None = None,
    ) -> bool:
        """Cache ``record`` as the thread's latest, atomically, in one round trip.

        Returns ``True`` when Redis now holds ``record`` (or a newer version), ``False`` when
        it could not apply it: rows that do not apply on top of what Redis holds, or rows
        that are not an append on top of the entry this process last wrote or verified (it
        then holds no hash chain to tag the result with; no round trip is made), in both cases
        the caller may send the complete record instead; Redis unavailable, or unusable data.

        Args:
            record: the checkpoint. With ``record.messages`` set it is complete and replaces
                an older cached version (a read fill).
            new_messages: the ``(seq, blob)`` rows this version added (write-through after a
                CAS write): only they are sent, applied on top of the cached
                ``base_version``; when Redis holds anything else the thread's data keys are
                deleted instead. Rows that only append are appended to the stored list;
                otherwise the list is rebuilt in Redis from its cached rows and these. Rows
                covering the whole record (a thread's first version) make it complete.
            base_created_at: ``created_at`` of the version the rows apply to. The cached
                copy is extended only when it is that checkpoint (a thread deleted and created
                anew reuses version numbers); ``None``: not checked.
            base_version: the version the rows apply to (count, at least 0); ``None``:
                ``record.version - 1``. A merged write-through (the rows of several
                consecutive versions, see :class:`~tenxgraph.storage.layered.LayeredStore`)
                names the version before the first of them.

        A copy never replaces a newer cached version. Never raises for a Redis problem; a
        write-through that cannot reach Redis marks the thread for deletion once Redis is
        back.
        """
        tid = record.thread_id
        with self._span(SPAN.CHECKPOINT_WRITE, tid, "EVALSHA") as sp:
            try:
                mac = await self._entry_mac()
            except _Unavailable as exc:
                self._mark_dirty(tid)
                self._failure(sp, exc, tid)
                return False
            try:
                put = self._put_args(record, new_messages, base_created_at, base_version, mac)
            except (ValueError, TypeError) as exc:  # a malformed record: drop what is cached
                self._garbage(sp, tid, type(exc).__name__)
                await self._delete_quietly(tid)
                return False
            if put is None:
                # Not an append on top of a chain this process holds: the caller sends the
                # complete record (tagged from scratch) instead.
                return False
            args, nrows, chain = put
            if sp.is_recording():
                sp.set_attribute(ATTR.VERSION, record.version)
                sp.set_attribute(ATTR.MESSAGES_WRITTEN, nrows)
                blobs = (
                    record.messages
                    if record.messages is not None
                    else [blob for _, blob in new_messages or ()]
                )
                sp.set_attribute(ATTR.BYTES, len(record.values) + sum(map(len, blobs)))
            try:
                keys = [*self.keys(tid), self._marker_key(tid, mac)]
                res = await self._call(self._put_script, keys, args)
                self._stats["writes"] += 1
                if res == 1:
                    self._keep_chain(tid, chain)
                elif res == 2:
                    self._drop_chain(tid)
                return res in (0, 1)
            except _Unavailable as exc:
                self._mark_dirty(tid)
                self._failure(sp, exc, tid)
            except (RedisError, ValueError, TypeError, UnicodeError) as exc:
                self._mark_dirty(tid)
                self._garbage(sp, tid, type(exc).__name__)
            return False

    def _put_args(
        self,
        record: StoredCheckpoint,
        new_messages: list[tuple[int, bytes]] | None,
        base_created_at: float | None,
        base_version: int | None,
        mac: EntryMac,
    ) -> tuple[list[Any], int, Chain] | None:
        """ARGV of the put script (see ``_PUT_LUA``), the number of rows it carries and the
        hash chain of the entry it writes; ``None`` for rows that cannot be tagged without
        the complete record (no chain of their base version, or not an append)."""
        owner = _owner(record.user_id)
        seqs: list[int]
        blobs: list[bytes]
        base_tag = ""
        prior: Chain | None = None
        if record.messages is not None:
            mode = "full"
            seqs, blobs = expand_ranges(record.ranges), record.messages
            if len(seqs) != len(blobs):
                raise ValueError("messages do not match ranges")
        elif new_messages is not None:
            mode = "inc"
            seqs = [s for s, _ in new_messages]
            blobs = [b for _, b in new_messages]
            if len(seqs) == ranges_len(record.ranges) and set(seqs) == set(
                expand_ranges(record.ranges)
            ):
                mode = "full"  # the rows are the whole record (a thread's first version)
        else:
            mode, seqs, blobs = "drop", [], []
        for b in blobs:
            if type(b) is not bytes:
                raise TypeError("message blobs must be bytes")
        rows = b",".join(blobs)
        lens = ",".join([str(len(b)) for b in blobs]).encode()
        base = record.version - 1 if base_version is None else int(base_version)
        base_at = repr(float(base_created_at)) if base_created_at is not None else ""
        if mode == "inc":
            prior = self._chain_for(record.thread_id)
            if (
                prior is None
                or prior.owner != owner
                or prior.version != base
                or (base_at and prior.created_at != base_at)
                or not ranges_extend(prior.ranges, record.ranges)
                or tail_seqs(prior.ranges, record.ranges) != seqs
            ):
                return None
            base_tag = prior.tag
            hr, hl = prior.rows, prior.lens
            empty = prior.empty
            if seqs:
                hr, hl = hr.copy(), hl.copy()
                sep = b"" if prior.empty else b","
                hr.update(sep + rows)
                hl.update(sep + lens)
                empty = False
        else:
            hr, hl = EntryMac.hashes(rows, lens)
            empty = not seqs
        created = repr(float(record.created_at))
        ranges_b = orjson.dumps(record.ranges)
        fields = (
            str(int(record.version)).encode(),
            record.values,
            ranges_b,
            str(int(record.next_seq)).encode(),
            record.status.encode("utf-8", "surrogatepass"),
            created.encode(),
        )
        tag = mac.tag(_FMT_B, record.thread_id, owner.encode(), fields, hr.digest(), hl.digest())
        chain = Chain(
            owner=owner,
            version=int(record.version),
            created_at=created,
            ranges=record.ranges,
            rows=hr,
            lens=hl,
            tag=tag,
            empty=empty,
            nbytes=CHAIN_BYTES + 16 * len(record.ranges) + len(record.thread_id),
        )
        args = [
            mode,
            record.version,
            owner,
            record.values,
            ranges_b,
            record.next_seq,
            record.status,
            created,
            self.ttl_s,
            _FMT,
            ",".join(map(str, seqs)),
            lens,
            rows,
            base_at,
            base,
            tag,
            base_tag,
        ]
        return args, len(seqs), chain

    # ------------------------------------------------------------------ MAC key and chains

    async def _entry_mac(self) -> EntryMac:
        """The tier's MAC (the key loaded on first use).

        Raises:
            _Unavailable: the key loader failed (the call is then a miss).
        """
        mac = self._mac
        if mac is not None:
            return mac
        assert self._mac_loader is not None
        try:
            key = await self._mac_loader()
            mac = EntryMac(key)
        except Exception as exc:  # noqa: BLE001 - no key now: a miss, retried next call
            logger.warning(
                "Redis cache at %s: the cache MAC key could not be loaded (%s); "
                "reading and writing without Redis",
                self._where,
                type(exc).__name__,
            )
            raise _Unavailable("mac key") from exc
        self._mac = mac
        return mac

    def _chain_for(self, thread_id: str) -> Chain | None:
        with self._chain_lock:
            chain = self._chains.get(thread_id)
            if chain is not None:
                self._chains.move_to_end(thread_id)
            return chain

    def _keep_chain(self, thread_id: str, chain: Chain) -> None:
        """Remember ``chain`` as the entry Redis holds for the thread (bounded in bytes)."""
        with self._chain_lock:
            chains = self._chains
            old = chains.pop(thread_id, None)
            if old is not None:
                self._chain_bytes -= old.nbytes
            if chain.nbytes > self.chain_max_bytes:
                return
            chains[thread_id] = chain
            self._chain_bytes += chain.nbytes
            while self._chain_bytes > self.chain_max_bytes:
                self._chain_bytes -= chains.popitem(last=False)[1].nbytes

    def _drop_chain(self, thread_id: str) -> None:
        with self._chain_lock:
            old = self._chains.pop(thread_id, None)
            if old is not None:
                self._chain_bytes -= old.nbytes

    async def invalidate(self, key: ThreadKey, *, deleted: bool = False) -> None:
        """Delete the thread's keys (any owner scope), in one round trip.

        Args:
            key: the thread (its ``user_id`` is not used).
            deleted: the thread was deleted in the source (accepted for the tier protocol;
                the keys are deleted either way).

        When Redis cannot be reached the thread is remembered and deleted first thing after
        reconnection. Never raises for a Redis problem.
        """
        tid = key.thread_id
        self._drop_chain(tid)
        with self._span(SPAN.CACHE_INVALIDATE, tid, "DEL") as sp:
            try:
                await self._call(self._client.delete, *self.keys(tid))
            except _Unavailable as exc:
                self._mark_dirty(tid)
                self._failure(sp, exc, tid)
            except (RedisError, ValueError, TypeError, UnicodeError) as exc:
                self._mark_dirty(tid)
                self._garbage(sp, tid, type(exc).__name__)

    async def acheck(self) -> None:
        """Check the configuration against the server, once, at setup (run by
        ``LayeredStore.asetup`` and so by ``PgCheckpointer.asetup`` and the first call of a
        checkpointer).

        Loads the MAC key when a ``mac_key_loader`` was given (a failure is logged and retried
        on first use). With ``cluster=True`` (and ``url``), asks the node ``INFO cluster`` on a plain
        connection: a Redis that is not cluster-enabled would otherwise fail every cache call.
        A server that cannot be reached now is not an error here (the tier is optional: its
        calls are misses until it answers).

        Raises:
            ConfigError: (``CONFIG_001``, ``context["key"] == "redis_cluster"``) ``cluster=True``
                but the Redis at ``url`` is not a cluster node.
        """
        if self._mac is None:
            # the MAC key now, on the caller's setup, rather than inside the first background
            # write-through (which a closing event loop could cut short); a failure is retried
            # on first use
            with contextlib.suppress(_Unavailable):
                await self._entry_mac()
        if self._factory is not RedisCluster or self._url is None:
            return
        probe = aioredis.Redis.from_url(self._url, **self._client_kwargs)
        try:
            async with asyncio.timeout(self.timeout_s):
                info = await probe.info("cluster")
        except Exception as exc:  # noqa: BLE001 - unreachable now: the calls will back off
            logger.debug("Redis at %s not checked: %s", self._where, type(exc).__name__)
            return
        finally:
            await probe.aclose()
        if str(info.get("cluster_enabled", "1")) == "0":
            raise ConfigError(
                f"the Redis at {self._where} is not a cluster (cluster_enabled:0); "
                "drop redis_cluster=True (or cluster=True), or point it at a node of a "
                "Redis Cluster",
                context={"key": "redis_cluster"},
            )

    async def aclose(self) -> None:
        """Close the connection pool when this tier created it; idempotent."""
        if self._closed:
            return
        self._closed = True
        probe, self._probe = self._probe, None
        if probe is not None and not probe.done():
            probe.cancel()
            try:
                if probe.get_loop() is asyncio.get_running_loop():
                    await asyncio.wait([probe])
            except RuntimeError:
                pass
        if self._owns_client:
            try:
                current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                current = None
            for loop, entry in list(self._loops.items()):
                self._loops.pop(loop, None)
                if loop is current:
                    if entry.guard is not None:
                        entry.guard.cancel()
                    try:
                        await entry.client.aclose()
                    except Exception:  # closing must not fail the caller
                        logger.debug("closing the Redis client failed", exc_info=True)
                elif not loop.is_closed() and entry.guard is not None:
                    loop.call_soon_threadsafe(entry.guard.cancel)  # the guard closes it

    # ------------------------------------------------------------------ state

    @property
    def client(self) -> aioredis.Redis | RedisCluster:
        """The ``redis.asyncio.Redis`` client this tier uses (shared with the generic cache of
        ``PgCheckpointer.aput_cache_value``)."""
        return self._client

    @property
    def available(self) -> bool:
        """``False`` while the tier is backing off after a connection-level failure."""
        return time.monotonic() >= self._down_until

    def stats(self) -> dict[str, int]:
        """Counters since creation: ``hits``, ``misses``, ``writes`` (write-throughs and fills
        that reached Redis), ``failures`` (calls that were down, timed out, lost the
        connection, met a cluster that is down, or failed inside the client), ``garbage``
        (unparseable answers), ``rejected`` (entries whose tag did not verify: altered or
        corrupted), ``dirty`` (threads waiting for deletion after an outage), ``chains`` and
        ``chain_bytes`` (hash chains kept, see :meth:`put`)."""
        return {
            **self._stats,
            "dirty": len(self._dirty),
            "chains": len(self._chains),
            "chain_bytes": self._chain_bytes,
        }

    # ------------------------------------------------------------------ internals

    def _span(self, name: str, thread_id: str, op: str) -> Any:
        """A CLIENT span; non-recording and nearly free without an SDK (no attribute dict is
        built then, see :func:`tenxgraph.telemetry.span`)."""
        if not enabled():
            return span(name, SpanKind.CLIENT)
        attrs = {
            **self._server_attrs,
            ATTR.DB_OPERATION: op,
            ATTR.TIER: self.name,
            ATTR.THREAD_ID: thread_id,
        }
        return span(name, SpanKind.CLIENT, attrs)

    async def _call(self, fn: Any, *args: Any) -> Any:
        """Run one Redis call under ``timeout_s``; raise :class:`_Unavailable` when the tier is
        backing off or the call failed at the connection level (and start backing off)."""
        if self._closed:
            raise _Unavailable("closed")
        if time.monotonic() < self._down_until:
            raise _Unavailable("backing off")
        try:
            async with asyncio.timeout(self.timeout_s):
                if self._dirty or self._dirty_overflow:
                    await self._flush_dirty()
                result = await fn(*args)
        except _UNAVAILABLE_ERRORS as exc:
            self._mark_down(exc)
            raise _Unavailable(type(exc).__name__) from exc
        except RedisError:
            raise  # Redis answered (a script error, a wrong type): the caller's garbage path
        except Exception as exc:  # noqa: BLE001 - see below
            # Only redis-py runs in this try (the calls above are the client's): anything else
            # escaping it, e.g. an AttributeError of the cluster client on a node object reset
            # while a failover reinitialises it, is a failing client, not unusable data.
            self._mark_down(exc, unexpected=True)
            raise _Unavailable(type(exc).__name__) from exc
        if self._down:
            self._mark_up()
        return result

    async def _flush_dirty(self) -> None:
        """Delete the keys of threads whose writes or invalidations were lost in an outage."""
        if self._dirty_overflow:
            logger.warning(
                "Redis cache at %s: more than %d threads changed during the outage; some "
                "may be served stale until their next write, TTL or conflict",
                self._where,
                _MAX_DIRTY,
            )
            self._dirty_overflow = False
        if not self._dirty:
            return
        tids = list(self._dirty)
        async with self._client.pipeline(transaction=False) as pipe:
            for tid in tids:
                pipe.delete(*self.keys(tid))
            await pipe.execute()
        self._dirty.difference_update(tids)

    def _mark_dirty(self, thread_id: str) -> None:
        """Remember that the keys of ``thread_id`` must be deleted once Redis answers again
        (bounded; beyond :data:`_MAX_DIRTY` threads only a warning is possible)."""
        if len(self._dirty) < _MAX_DIRTY:
            self._dirty.add(thread_id)
        else:
            self._dirty_overflow = True

    def _mark_down(self, exc: BaseException, *, unexpected: bool = False) -> None:
        """Back off for ``reconnect_backoff_s`` after a connection-level failure (or an
        ``unexpected`` exception of the client, logged with its traceback); warn once per
        outage and start the reconnection probe."""
        self._down_until = time.monotonic() + self.reconnect_backoff_s
        if not self._down:
            self._down = True
            logger.warning(
                "Redis cache at %s unavailable (%s%s); reading and writing without it, "
                "retrying every %.2f s",
                self._where,
                "unexpected error of the Redis client: " if unexpected else "",
                type(exc).__name__,
                self.reconnect_backoff_s,
                exc_info=exc if unexpected else None,
            )
        self._start_probe()

    def _mark_up(self) -> None:
        """Redis answers again: stop backing off."""
        self._down = False
        logger.info("Redis cache at %s is reachable again", self._where)

    def _start_probe(self) -> None:
        """Start the background reconnection probe unless it runs already."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        probe = self._probe
        if self._closed or (probe is not None and not probe.done() and probe.get_loop() is loop):
            return
        self._probe = loop.create_task(self._probe_loop(), name="tenxgraph-redis-probe")

    async def _probe_loop(self) -> None:
        """While down: every ``reconnect_backoff_s``, flush lost threads and ``PING`` (every
        master of a cluster); on success the tier is up again (so it reconnects even when no
        call comes)."""
        while self._down and not self._closed:
            await asyncio.sleep(max(self._down_until - time.monotonic(), 0.005))
            if not self._down or self._closed:
                return
            if time.monotonic() < self._down_until:
                continue
            try:
                async with asyncio.timeout(self.timeout_s):
                    await self._flush_dirty()
                    client = self._client
                    if isinstance(client, RedisCluster):
                        # every master, not one node: a cluster with one master dead still
                        # answers PING elsewhere, and coming back up would only flap
                        await client.ping(target_nodes=RedisCluster.PRIMARIES)
                    else:
                        await client.ping()
            except _UNAVAILABLE_ERRORS as exc:
                self._mark_down(exc)
                continue
            except Exception:  # noqa: BLE001 - any other client failure: still down, retry
                self._down_until = time.monotonic() + self.reconnect_backoff_s
                continue
            if self._down:
                self._mark_up()

    def _failure(self, sp: Any, exc: BaseException, thread_id: str) -> None:
        """Count an unavailable-Redis call and add a cache-failure event to ``sp``."""
        self._stats["failures"] += 1
        if sp.is_recording():
            attrs = {ATTR.TIER: self.name, ATTR.ERROR_TYPE: str(exc) or type(exc).__name__}
            sp.add_event(EVENT.CACHE_FAILURE, attrs)

    def _rejected(self, sp: Any, thread_id: str) -> None:
        """Count (``tenxgraph.cache.rejected``), log (warning) and record as a span event an
        entry whose tag does not verify."""
        self._stats["rejected"] += 1
        counter(METRIC.CACHE_REJECTED).add(1, {ATTR.TIER: self.name})
        logger.warning(
            "Redis cache at %s holds an entry of thread %r whose MAC does not verify (altered "
            "or corrupted, or written with another key); rejected, read from the source",
            self._where,
            thread_id,
        )
        if sp.is_recording():
            sp.add_event(EVENT.CACHE_REJECTED, {ATTR.TIER: self.name, ATTR.THREAD_ID: thread_id})

    def _garbage(self, sp: Any, thread_id: str, what: str) -> None:
        """Count, log (warning) and record as a span event data that does not parse."""
        self._stats["garbage"] += 1
        logger.warning(
            "Redis cache at %s holds unusable data for thread %r (%s); treated as a miss",
            self._where,
            thread_id,
            what,
        )
        if sp.is_recording():
            sp.add_event(EVENT.CACHE_FAILURE, {ATTR.TIER: self.name, ATTR.ERROR_TYPE: "garbage"})

    async def _delete_quietly(self, thread_id: str) -> None:
        """Delete the thread's keys; when that fails too, owe it (dirty) for later."""
        self._drop_chain(thread_id)
        try:
            await self._call(self._client.delete, *self.keys(thread_id))
        except (_Unavailable, RedisError):
            self._mark_dirty(thread_id)

    def _parse(self, key: ThreadKey, res: Any, mac: EntryMac) -> StoredCheckpoint | None:
        """Turn the GET script's answer into a record; raise :class:`_Garbage` when it does
        not parse (the script returns ``0`` after deleting structurally broken keys) and
        :class:`_Rejected` when its tag does not verify (checked before anything is decoded;
        a verified entry's hash chain is kept for the next write-through)."""
        if res is None:
            return None
        if not isinstance(res, list) or len(res) != 9:
            raise _Garbage("layout")
        version_b, values, ranges_b, next_seq_b, status_b, created_b, lens_b, body, tag = res
        if not all(type(x) is bytes for x in (version_b, values, ranges_b, next_seq_b)) or not all(
            type(x) is bytes for x in (status_b, created_b, lens_b, body, tag)
        ):
            raise _Garbage("layout")
        try:
            version = int(version_b)
            ranges = _parse_ranges(ranges_b)
            next_seq = int(next_seq_b)
            status = status_b.decode("utf-8")
            created_at = float(created_b)
            messages = _split(lens_b, body)
        except (ValueError, TypeError, UnicodeError, orjson.JSONDecodeError) as exc:
            raise _Garbage(type(exc).__name__) from None
        if version < 1 or len(messages) != ranges_len(ranges):
            raise _Garbage("ranges")
        # The tag, before anything is decoded: over every byte a read turns into state.
        owner = _owner(key.user_id)
        hr, hl = EntryMac.hashes(body, lens_b)
        fields = (version_b, values, ranges_b, next_seq_b, status_b, created_b)
        want = mac.tag(_FMT_B, key.thread_id, owner.encode(), fields, hr.digest(), hl.digest())
        if not EntryMac.same(want, tag):
            raise _Rejected(key.thread_id)
        if type(values) is not bytes or not values.startswith(b"{"):
            raise _Garbage("values")
        try:
            if type(orjson.loads(values)) is not dict:
                raise _Garbage("values")
        except orjson.JSONDecodeError:
            raise _Garbage("values") from None
        # The rows arrive as one contiguous string: decode them in one call. When that path
        # cannot decide alone (tagged values, a row it refuses) the checkpointer decodes the
        # rows one by one, exactly as rows read from the source, and a row that does not
        # decode makes the copy a miss there (see ``_decode_or_refetch``).
        decoded = serde.decode_message_array(body, len(messages)) if messages else None
        if decoded is None:
            for b in messages:
                if not _looks_like_blob(b):
                    raise _Garbage("message")
        self._keep_chain(
            key.thread_id,
            Chain(
                owner=owner,
                version=version,
                created_at=created_b.decode("ascii", "replace"),
                ranges=ranges,
                rows=hr,
                lens=hl,
                tag=want,
                empty=not messages,
                nbytes=CHAIN_BYTES + 16 * len(ranges) + len(key.thread_id),
            ),
        )
        return StoredCheckpoint(
            thread_id=key.thread_id,
            user_id=key.user_id,
            version=version,
            values=values,
            ranges=ranges,
            messages=messages,
            next_seq=next_seq,
            status=status,
            created_at=created_at,
            decoded=(decoded, len(decoded)) if decoded is not None else None,
        )


class _Scripts:
    """The Lua scripts of the tier, registered on one client."""

    __slots__ = ("get", "put")

    def __init__(self, client: aioredis.Redis | RedisCluster) -> None:
        self.get = client.register_script(_GET_LUA)
        self.put = client.register_script(_PUT_LUA)


class _LoopClient:
    """The client of one event loop, its scripts, and the task that closes it with the loop."""

    __slots__ = ("client", "guard", "scripts")

    def __init__(self, client: aioredis.Redis | RedisCluster, scripts: _Scripts) -> None:
        self.client = client
        self.scripts = scripts
        self.guard: asyncio.Task[None] | None = None


async def _close_on_loop_shutdown(client: aioredis.Redis | RedisCluster) -> None:
    """Wait forever; when cancelled (the loop is shutting down, e.g. at the end of
    ``asyncio.run``, or the tier is closed), close ``client`` on its own loop, so no
    connection outlives the loop that opened it ("Event loop is closed")."""
    try:
        await asyncio.Event().wait()
    finally:
        try:
            await client.aclose()
        except Exception:  # noqa: BLE001 - best effort at loop shutdown
            logger.debug("closing a Redis client at loop shutdown failed", exc_info=True)
