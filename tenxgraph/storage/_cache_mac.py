"""Keyed MACs of shared cache entries: Redis holds copies, the application holds the key.

A Redis entry (see :mod:`tenxgraph.storage.redis`) is served only when its tag verifies: a
keyed BLAKE2b (RFC 7693 keyed mode, 16-byte tag) over every byte of the entry that a read turns
into state, bound to the thread, the owner scope and the checkpoint (version and creation time):

``tag = BLAKE2b(key, person="tenxgraph-entry")(len-prefixed fields)``, the fields being the
layout version, ``thread_id``, the owner digest, ``version``, ``values``, ``ranges``,
``next_seq``, ``status``, ``created_at`` (each exactly as Redis stores it), and the digests of the
two strings that hold the messages: ``rows`` (the rows joined by ``,``) and ``lens`` (their
lengths). A copy whose state, message text, role, order, number of messages, owner or thread
was changed (version and creation time kept or not) does not verify without the key; Redis
never sees the key.

The two message digests are unkeyed BLAKE2b-256 over the strings, computed *incrementally*: an
append-only write-through extends the strings in Redis (``APPEND``), and :class:`Chain` keeps
the hash states of the strings this process last wrote or verified, so the next version's tag
costs the new rows only, never the thread's length. A write-through that is not an append (or
finds no chain) sends the complete record instead, whose digests are computed once.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["MAC_KEY_MIN_BYTES", "Chain", "EntryMac", "check_key"]

#: Shortest key accepted (bytes); 32 random bytes is the recommended size.
MAC_KEY_MIN_BYTES = 16
#: Tag size (bytes) stored with each entry (hex in Redis).
TAG_BYTES = 16
_PERSON = b"tenxgraph-entry"
_DIGEST_BYTES = 32
#: The lengths of the nine fields a tag covers (see :meth:`EntryMac.tag`).
_LENGTHS = struct.Struct(">9Q")
#: Estimated memory of one :class:`Chain` besides its ranges (two hash states, the object).
CHAIN_BYTES = 900


def check_key(key: Any) -> bytes:
    """The MAC key as ``bytes``, checked.

    Raises:
        ConfigError: (``CONFIG_001``, ``context["key"] == "cache_mac_key"``) not ``bytes`` or
            shorter than :data:`MAC_KEY_MIN_BYTES`.
    """
    from tenxgraph.core.exceptions import ConfigError

    if not isinstance(key, (bytes, bytearray)) or len(key) < MAC_KEY_MIN_BYTES:
        raise ConfigError(
            f"cache_mac_key must be bytes, at least {MAC_KEY_MIN_BYTES} long (e.g. "
            "os.urandom(32), kept by the application and never stored in Redis)",
            context={"key": "cache_mac_key"},
        )
    raw = bytes(key)
    if len(raw) > 64:  # BLAKE2b takes keys up to 64 bytes: longer ones are hashed to 64
        raw = hashlib.blake2b(raw, person=b"tenxgraph-key").digest()
    return raw


def _h() -> Any:
    return hashlib.blake2b(digest_size=_DIGEST_BYTES)


@dataclass(slots=True)
class Chain:
    """The hash states of the message strings of one cached checkpoint, as this process last
    wrote or verified them in Redis.

    Attributes:
        owner: owner digest of the entry.
        version: the checkpoint's version.
        created_at: its ``created_at`` as stored (``repr`` of the float).
        ranges: its seq ranges (to tell whether the next version only appends).
        rows: BLAKE2b state over the ``rows`` string.
        lens: BLAKE2b state over the ``lens`` string.
        tag: the entry's tag (hex), which the next write-through names as its base.
        empty: whether the strings are empty (the next append then starts without ``,``).
        nbytes: memory counted for this chain (bytes).
    """

    owner: str
    version: int
    created_at: str
    ranges: tuple[tuple[int, int], ...]
    rows: Any
    lens: Any
    tag: str
    empty: bool
    nbytes: int


class EntryMac:
    """Computes and checks the tags of cache entries with one key (see the module docs).

    Args:
        key: the secret (``bytes``, at least 16; see :func:`check_key`).

    Raises:
        ConfigError: (``CONFIG_001``) a bad key.
    """

    __slots__ = ("_base",)

    def __init__(self, key: bytes) -> None:
        self._base = hashlib.blake2b(key=check_key(key), digest_size=TAG_BYTES, person=_PERSON)

    def __repr__(self) -> str:
        return "EntryMac(<key hidden>)"

    def marker(self, thread_id: str) -> str:
        """The keyed digest naming an erased thread's marker in Redis (hex): it names the
        thread to whoever holds the key, and reveals nothing of it to anyone else."""
        h = self._base.copy()
        h.update(b"erased\x00" + thread_id.encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    @staticmethod
    def hashes(rows: bytes, lens: bytes) -> tuple[Any, Any]:
        """Fresh hash states over a complete ``rows`` and ``lens`` string."""
        hr, hl = _h(), _h()
        hr.update(rows)
        hl.update(lens)
        return hr, hl

    def tag(
        self,
        fmt: bytes,
        thread_id: str,
        owner: bytes,
        fields: tuple[bytes, bytes, bytes, bytes, bytes, bytes],
        rows_digest: bytes,
        lens_digest: bytes,
    ) -> str:
        """The entry's tag (hex).

        Args:
            fmt: layout version.
            thread_id: the thread.
            owner: owner digest.
            fields: ``(version, values, ranges, next_seq, status, created_at)`` exactly as
                stored.
            rows_digest: digest of the ``rows`` string.
            lens_digest: digest of the ``lens`` string.
        """
        parts = (fmt, thread_id.encode("utf-8", "surrogatepass"), owner, *fields)
        h = self._base.copy()  # the key block is already absorbed: a copy, not a new key setup
        # every length first, then the fields: an injective encoding of the fields
        h.update(_LENGTHS.pack(*map(len, parts)))
        h.update(b"".join(parts))
        h.update(rows_digest)
        h.update(lens_digest)
        return h.hexdigest()

    @staticmethod
    def same(a: str | bytes, b: str | bytes) -> bool:
        """Constant-time comparison of two tags."""
        if isinstance(a, str):
            a = a.encode("ascii", "replace")
        if isinstance(b, str):
            b = b.encode("ascii", "replace")
        return hmac.compare_digest(a, b)
