"""Authenticated encryption of stored content: :class:`Keyring`, the sealed envelope, and the
associated data that binds each ciphertext to where it is stored.

A checkpointer built with ``cipher=Keyring({"k1": key}, active="k1")`` (every checkpointer takes
it: ``InMemoryCheckpointer``, ``SqliteCheckpointer``, ``PgCheckpointer``) seals what holds
content before it reaches any storage tier, and opens it after a read, in one place: the
checkpointer facade (:mod:`tenxgraph.storage.checkpointer.base`) through the helpers of this
module. Every tier below (the in-process LRU, Redis, SQLite, Postgres, memory) only ever sees
the sealed bytes. Sealed: a version's state values, each message row, each tool-ledger result,
each ``aput_state_cache`` entry. Not sealed (needed by queries): thread and user ids, versions,
message seqs and ranges, statuses, timestamps, ledger call keys, tool names and call ids,
thread metadata, and the inputs of background runs (docs/how-to/encryption.md).

Algorithm: AES-256-GCM (NIST SP 800-38D) from the ``cryptography`` package, a fresh random
96-bit nonce per seal. Envelope (format 1)::

    0xFE 0x54 | format (1 byte, 1) | key id length (1 byte) | key id (ASCII) | nonce (12) |
    ciphertext | tag (16)

``0xFE`` never starts UTF-8 text, so a sealed value is never mistaken for JSON (and a plain JSON
row read through a cipher is refused, never served). The key id in clear lets a reader pick the
key and lets ``tenxgraph rotate-keys`` find the rows still sealed under an old key.

Associated data (:func:`aad`): the envelope header (so the key id cannot be swapped), the table
(``checkpoints``, ``messages``, ``tool_executions``, ``state_cache``), the owner's ``user_id``,
the ``thread_id`` and the position (version, message seq, ledger call key), each
length-prefixed. A row copied to another thread, user, version, seq or table does not
authenticate: every read raises :class:`~tenxgraph.core.exceptions.DecryptionError`
(``STORAGE_CRYPTO_001``) and returns nothing of it.

Keys belong to the application (an environment variable, a KMS, a secret file): tenxgraph never
stores them. Crypto-shredding: :class:`TenantKeyrings` resolves a keyring per ``user_id``;
deleting a tenant's keys makes every row of that tenant unreadable (``STORAGE_CRYPTO_001``,
``reason`` ``"unknown_key"``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from tenxgraph.core.exceptions import ConfigError, DecryptionError
from tenxgraph.records import CheckpointWrite, LedgerEntry, StoredCheckpoint, ThreadKey

__all__ = [
    "FORMAT",
    "Cipher",
    "Keyring",
    "TenantKeyrings",
    "aad",
    "check_cipher",
    "header_for",
    "key_id_of",
    "keyring_from_env",
    "load_cipher",
    "open_blob",
    "open_ledger",
    "open_record",
    "open_run_payload",
    "refuse_without_cipher",
    "seal_blob",
    "seal_run_payload",
    "seal_ledger",
    "seal_write",
]

#: Envelope format of this code: AES-256-GCM (also accepts 128 and 192-bit keys).
FORMAT = 1
_MAGIC = b"\xfeT"
_NONCE = 12
_TAG = 16
_AAD_PREFIX = b"tenxgraph-aad-1"
_LEN = struct.Struct(">I")
_KEY_SIZES = (16, 24, 32)
#: Longest key id (ASCII characters).
MAX_KEY_ID = 64


def aad(header: bytes, table: str, user_id: str, thread_id: str, position: int | str) -> bytes:
    """The associated data of one sealed value: what it is bound to.

    Args:
        header: the envelope header (magic, format, key id) the value is sealed with.
        table: ``"checkpoints"``, ``"messages"``, ``"tool_executions"`` or ``"state_cache"``.
        user_id: the owner scope of the thread (``"*"`` when user isolation is off).
        thread_id: the thread.
        position: the version (state values), the message seq, or the ledger call key.

    Returns:
        Bytes, every field length-prefixed (no two different tuples give the same bytes).
    """
    pos = (f"i{position}" if type(position) is int else f"s{position}").encode(
        "utf-8", "surrogatepass"
    )
    t = table.encode()
    u = user_id.encode("utf-8", "surrogatepass")
    th = thread_id.encode("utf-8", "surrogatepass")
    return b"%s%s%s%s%s%s%s%s%s%s%s" % (
        _AAD_PREFIX,
        _LEN.pack(len(header)),
        header,
        _LEN.pack(len(t)),
        t,
        _LEN.pack(len(u)),
        u,
        _LEN.pack(len(th)),
        th,
        _LEN.pack(len(pos)),
        pos,
    )


def key_id_of(blob: bytes | memoryview | None) -> str | None:
    """The key id a stored value is sealed with, or ``None`` when it is not a sealed envelope
    (plain JSON written without a cipher, or garbage)."""
    if blob is None:
        return None
    head = bytes(blob[: 4 + MAX_KEY_ID])
    if len(head) < 4 or head[:2] != _MAGIC or head[2] != FORMAT:
        return None
    n = head[3]
    if not 1 <= n <= MAX_KEY_ID or len(head) < 4 + n:
        return None
    try:
        return head[4 : 4 + n].decode("ascii")
    except UnicodeDecodeError:
        return None


def header_for(key_id: str) -> bytes:
    """The envelope header of values sealed under ``key_id`` (magic, format, key id): the first
    bytes of every such value, which ``tenxgraph rotate-keys`` compares in SQL."""
    kid = key_id.encode("ascii")
    return _MAGIC + bytes((FORMAT, len(kid))) + kid


def _check_key_id(kid: Any) -> str:
    if (
        not isinstance(kid, str)
        or not 1 <= len(kid) <= MAX_KEY_ID
        or not kid.isascii()
        or not kid.isprintable()
    ):
        raise ConfigError(
            f"a key id must be a printable ASCII str of 1 to {MAX_KEY_ID} characters, got {kid!r}",
            context={"key": "cipher", "field": "key_id"},
        )
    return kid


@runtime_checkable
class Cipher(Protocol):
    """What ``cipher=`` accepts: something that gives the keyring of an owner scope."""

    def for_user(self, user_id: str) -> Keyring | None:
        """The keyring sealing and opening the rows of ``user_id`` (``None``: none, the rows
        of that user cannot be read or written)."""
        ...


class Keyring:
    """Named AES-GCM keys, one of them active: new values are sealed under ``active``; every
    key of the ring opens what it sealed (the key id travels in each envelope).

    Key rotation: build the ring with the new key active and the old ones kept, deploy it, then
    run ``tenxgraph rotate-keys`` to re-seal old rows under the active key; once it reports
    nothing left, the old keys can be dropped (docs/how-to/encryption.md). One ring serves
    every user; :class:`TenantKeyrings` gives one ring per user (crypto-shredding).

    Args:
        keys: key id (printable ASCII, 1 to 64 characters) -> key (``bytes`` of 32, or 16 or
            24, bytes: AES-256, -128, -192). Keys come from the application (e.g.
            ``os.urandom(32)`` kept in a secret store) and are never written anywhere by
            tenxgraph.
        active: the id of the key that seals new values; must be in ``keys``.

    Raises:
        ConfigError: ``CONFIG_001`` (``context["key"] == "cipher"``) for an empty ring, a bad
            key id, a key that is not 16, 24 or 32 bytes, or ``active`` not in ``keys``.
    """

    __slots__ = ("_active", "_aeads", "_header")

    def __init__(self, keys: Mapping[str, bytes], active: str) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not isinstance(keys, Mapping) or not keys:
            raise ConfigError(
                "Keyring needs a non-empty mapping of key id -> key bytes",
                context={"key": "cipher", "field": "keys"},
            )
        aeads: dict[str, Any] = {}
        for kid, key in keys.items():
            _check_key_id(kid)
            if not isinstance(key, (bytes, bytearray)) or len(key) not in _KEY_SIZES:
                raise ConfigError(
                    f"key {kid!r} must be bytes of 32 (AES-256), 24 or 16 bytes, e.g. "
                    f"os.urandom(32); got {type(key).__name__}"
                    + (f" of {len(key)} bytes" if isinstance(key, (bytes, bytearray)) else ""),
                    context={"key": "cipher", "field": "keys", "key_id": kid},
                )
            aeads[kid] = AESGCM(bytes(key))
        if not isinstance(active, str) or active not in aeads:
            raise ConfigError(
                f"active key {active!r} is not in the keyring ({sorted(aeads)})",
                context={"key": "cipher", "field": "active"},
            )
        self._aeads = aeads
        self._active = active
        self._header = header_for(active)

    @property
    def active(self) -> str:
        """The id of the key sealing new values."""
        return self._active

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every key id of the ring, in the order given."""
        return tuple(self._aeads)

    def for_user(self, user_id: str) -> Keyring:
        """This ring (one ring serves every user)."""
        return self

    def seal(
        self, data: bytes, table: str, user_id: str, thread_id: str, position: int | str
    ) -> bytes:
        """Encrypt and authenticate ``data`` under the active key, bound to its place.

        Args:
            data: the plaintext bytes.
            table: the table it is stored in (see :func:`aad`).
            user_id: the owner scope of its thread.
            thread_id: its thread.
            position: its version, message seq or ledger call key.

        Returns:
            The envelope (header, nonce, ciphertext and tag).
        """
        header = self._header
        nonce = os.urandom(_NONCE)
        ct: bytes = self._aeads[self._active].encrypt(
            nonce, data, aad(header, table, user_id, thread_id, position)
        )
        return header + nonce + ct

    def open(
        self,
        blob: bytes | memoryview,
        table: str,
        user_id: str,
        thread_id: str,
        position: int | str,
    ) -> bytes:
        """Authenticate and decrypt an envelope read from ``table`` at ``(user_id, thread_id,
        position)``.

        Args:
            blob: the stored envelope.
            table: the table it was read from (see :func:`aad`).
            user_id: the owner scope of its thread.
            thread_id: its thread.
            position: its version, message seq or ledger call key.

        Returns:
            The plaintext bytes.

        Raises:
            DecryptionError: ``STORAGE_CRYPTO_001``: not an envelope (``reason``
                ``"not_sealed"``), sealed under a key the ring does not hold
                (``"unknown_key"``), or it does not authenticate there: altered, or moved
                from another thread, user, position or table (``"authentication"``).
        """
        from cryptography.exceptions import InvalidTag

        raw = bytes(blob)
        kid = key_id_of(raw)
        if kid is None:
            raise _refused(table, thread_id, position, None, "not_sealed")
        aead = self._aeads.get(kid)
        if aead is None:
            raise _refused(table, thread_id, position, kid, "unknown_key")
        h = 4 + len(kid)
        if len(raw) < h + _NONCE + _TAG:
            raise _refused(table, thread_id, position, kid, "authentication")
        try:
            out: bytes = aead.decrypt(
                raw[h : h + _NONCE],
                raw[h + _NONCE :],
                aad(raw[:h], table, user_id, thread_id, position),
            )
        except InvalidTag:
            raise _refused(table, thread_id, position, kid, "authentication") from None
        return out

    def __repr__(self) -> str:
        # Never the keys.
        return f"Keyring(key_ids={list(self._aeads)!r}, active={self._active!r})"


class TenantKeyrings:
    """One :class:`Keyring` per user (tenant), resolved by the application: crypto-shredding.

    Every row of a user is sealed under that user's ring (the owner's ``user_id`` is also in
    each row's associated data). Deleting a tenant's keys from wherever ``resolve`` looks them
    up makes all its rows, in every table and every cache, unreadable: reads raise
    ``DecryptionError`` (``STORAGE_CRYPTO_001``, ``reason`` ``"unknown_key"``) and writes raise
    ``ConfigError``. Needs user isolation (``enforce_user_isolation=True``, the default):
    without it every thread's owner scope is ``"*"``.

    Args:
        resolve: ``user_id -> Keyring | None``; called on every seal and open, so it should be
            fast (cache the rings; drop a ring from the cache to shred). ``None`` means the
            tenant has no keys (shredded, or never provisioned).
    """

    __slots__ = ("_resolve",)

    def __init__(self, resolve: Callable[[str], Keyring | None]) -> None:
        if not callable(resolve):
            raise ConfigError(
                "TenantKeyrings needs a callable user_id -> Keyring | None",
                context={"key": "cipher", "field": "resolve"},
            )
        self._resolve = resolve

    def for_user(self, user_id: str) -> Keyring | None:
        """The ring of ``user_id`` as ``resolve`` gives it (``None``: no keys).

        Raises:
            ConfigError: ``CONFIG_001`` when ``resolve`` returns something not a Keyring.
        """
        ring = self._resolve(user_id)
        if ring is not None and not isinstance(ring, Keyring):
            raise ConfigError(
                f"TenantKeyrings resolve() returned a {type(ring).__name__}, not a Keyring",
                context={"key": "cipher", "field": "resolve"},
            )
        return ring

    def __repr__(self) -> str:
        return f"TenantKeyrings({getattr(self._resolve, '__qualname__', 'resolve')})"


def check_cipher(cipher: Any) -> Cipher | None:
    """The ``cipher=`` argument of a checkpointer, checked: ``None``, a :class:`Keyring`, a
    :class:`TenantKeyrings` or another object with ``for_user``.

    Raises:
        ConfigError: ``CONFIG_001`` (``context["key"] == "cipher"``) for anything else.
    """
    if cipher is None or isinstance(cipher, (Keyring, TenantKeyrings)):
        return cipher
    if callable(getattr(cipher, "for_user", None)):
        return cipher  # type: ignore[no-any-return]
    raise ConfigError(
        f"cipher must be a tenxgraph.storage.crypto.Keyring (or TenantKeyrings), got "
        f"{type(cipher).__name__}",
        context={"key": "cipher"},
    )


def _refused(
    table: str, thread_id: str, position: int | str, kid: str | None, reason: str
) -> DecryptionError:
    why = {
        "no_cipher": f"it is sealed (key {kid!r}) and this checkpointer has no cipher= (the "
        "tenxgraph CLI: --keyring)",
        "not_sealed": "it is not sealed (written without a cipher, or damaged)",
        "unknown_key": f"its key {kid!r} is not in the keyring (rotated out or shredded)",
        "authentication": "it does not authenticate here (altered, or moved from another "
        "thread, user, position or table)",
    }[reason]
    return DecryptionError(
        f"the stored {table} row of thread {thread_id!r} at {position!r} cannot be decrypted: "
        f"{why}",
        context={
            "table": table,
            "thread_id": thread_id,
            "position": position,
            "key_id": kid,
            "reason": reason,
        },
    )


def refuse_without_cipher(rec: StoredCheckpoint) -> None:
    """Raise when ``rec`` (read by a checkpointer without a cipher) holds sealed values, so
    an encrypted store read without its keyring says so instead of failing to parse JSON.

    Raises:
        DecryptionError: ``STORAGE_CRYPTO_001`` (``reason`` ``"no_cipher"``).
    """
    if rec.values[:2] == _MAGIC:
        kid = key_id_of(rec.values)
        raise _refused("checkpoints", rec.thread_id, rec.version, kid, "no_cipher")


def _ring(cipher: Cipher, user_id: str, thread_id: str, table: str, position: int | str) -> Keyring:
    ring = cipher.for_user(user_id)
    if ring is None:
        raise _refused(table, thread_id, position, None, "unknown_key")
    return ring


def _ring_for_write(cipher: Cipher, user_id: str) -> Keyring:
    ring = cipher.for_user(user_id)
    if ring is None:
        raise ConfigError(
            "the cipher has no keyring for this user (TenantKeyrings resolved None): nothing "
            "can be written for it",
            context={"key": "cipher", "field": "user_id"},
        )
    return ring


def seal_write(cipher: Cipher, w: CheckpointWrite) -> CheckpointWrite:
    """Seal ``w`` in place and return it: its values for version ``w.expected_version + 1``,
    each new message row for its seq. The caller hands ``w`` to the store next and keeps no
    plaintext reference to its bytes (the facade built it for this one write)."""
    ring = _ring_for_write(cipher, w.user_id)
    user, tid = w.user_id, w.thread_id
    seal = ring.seal
    w.values = seal(w.values, "checkpoints", user, tid, w.expected_version + 1)
    if w.new_messages:
        w.new_messages = [(q, seal(b, "messages", user, tid, q)) for q, b in w.new_messages]
    return w


def open_record(cipher: Cipher, rec: StoredCheckpoint, start: int = 0) -> StoredCheckpoint:
    """A copy of ``rec`` with its values and messages opened (messages before index ``start``
    are left as they are: the caller holds them decoded already).

    Raises:
        DecryptionError: ``STORAGE_CRYPTO_001`` when any of them does not open there.
    """
    user, tid = rec.user_id, rec.thread_id
    ring = _ring(cipher, user, tid, "checkpoints", rec.version)
    values = ring.open(rec.values, "checkpoints", user, tid, rec.version)
    msgs = rec.messages
    if msgs is not None and len(msgs) > start:
        opened = msgs[:start]
        i = 0
        for s, e in rec.ranges:
            for seq in range(s, e):
                if i >= start:
                    opened.append(ring.open(msgs[i], "messages", user, tid, seq))
                i += 1
        msgs = opened
    return replace(rec, values=values, messages=msgs)


def seal_ledger(cipher: Cipher, key: ThreadKey, entry: LedgerEntry) -> LedgerEntry:
    """``entry`` with its result sealed for ``key``'s thread and its call key."""
    ring = _ring_for_write(cipher, key.user_id)
    return replace(
        entry,
        result=ring.seal(
            entry.result, "tool_executions", key.user_id, key.thread_id, entry.call_key
        ),
    )


def open_ledger(cipher: Cipher, key: ThreadKey, entry: LedgerEntry) -> LedgerEntry:
    """``entry`` (read for ``key``) with its result opened.

    Raises:
        DecryptionError: ``STORAGE_CRYPTO_001`` when it does not open there.
    """
    ring = _ring(cipher, key.user_id, key.thread_id, "tool_executions", entry.call_key)
    return replace(
        entry,
        result=ring.open(
            entry.result, "tool_executions", key.user_id, key.thread_id, entry.call_key
        ),
    )


def seal_blob(cipher: Cipher, table: str, user_id: str, thread_id: str, data: bytes) -> bytes:
    """``data`` sealed as the one entry of ``(user_id, thread_id)`` in ``table`` (the state
    cache: position ``"latest"``)."""
    return _ring_for_write(cipher, user_id).seal(data, table, user_id, thread_id, "latest")


def open_blob(cipher: Cipher, table: str, user_id: str, thread_id: str, blob: bytes) -> bytes:
    """Open what :func:`seal_blob` sealed for ``(user_id, thread_id)`` in ``table``.

    Raises:
        DecryptionError: ``STORAGE_CRYPTO_001`` when it does not open there.
    """
    ring = _ring(cipher, user_id, thread_id, table, "latest")
    return ring.open(blob, table, user_id, thread_id, "latest")


def seal_run_payload(
    cipher: Cipher | None, field: str, owner: str, thread_id: str, run_id: str, data: bytes
) -> bytes:
    """A background run's ``input`` or ``output`` as stored: sealed for its run (table
    ``"runs.<field>"``, position the run id) when there is a cipher, else ``data`` itself.

    Args:
        cipher: the checkpointer's cipher, or ``None``.
        field: ``"input"`` or ``"output"``.
        owner: the run's owner scope (``RunRecord.owner``).
        thread_id: the run's thread.
        run_id: the run's id.
        data: the encoded payload (orjson bytes).

    Raises:
        ConfigError: ``CONFIG_001`` when the cipher has no keyring for ``owner``.
    """
    if cipher is None:
        return data
    return _ring_for_write(cipher, owner).seal(data, f"runs.{field}", owner, thread_id, run_id)


def open_run_payload(
    cipher: Cipher | None, field: str, owner: str, thread_id: str, run_id: str, blob: bytes
) -> bytes:
    """Open what :func:`seal_run_payload` stored (plain JSON when there is no cipher).

    Raises:
        DecryptionError: ``STORAGE_CRYPTO_001``: sealed but read without a cipher
            (``"no_cipher"``), plain under a cipher (``"not_sealed"``), or moved to another
            run, thread, user or field (``"authentication"``).
    """
    table = f"runs.{field}"
    if cipher is None:
        if bytes(blob[:2]) == _MAGIC:
            raise _refused(table, thread_id, run_id, key_id_of(bytes(blob)), "no_cipher")
        return bytes(blob)
    return _ring(cipher, owner, thread_id, table, run_id).open(
        blob, table, owner, thread_id, run_id
    )


#: Environment variable of :func:`keyring_from_env`: ``id=base64key`` pairs, comma-separated.
KEYS_ENV = "TENXGRAPH_KEYS"
#: Environment variable naming the active key id for :func:`keyring_from_env`.
ACTIVE_KEY_ENV = "TENXGRAPH_ACTIVE_KEY"
#: Environment variable the ``tenxgraph`` CLI reads when ``--keyring`` is not given.
KEYRING_ENV = "TENXGRAPH_KEYRING"


def keyring_from_env() -> Keyring:
    """A :class:`Keyring` from the environment: ``TENXGRAPH_KEYS="k1=<base64>,k2=<base64>"``
    (each key standard base64 of 32 random bytes, e.g. ``python -c "import os, base64;
    print(base64.b64encode(os.urandom(32)).decode())"``) and ``TENXGRAPH_ACTIVE_KEY=k2``.
    Usable as ``--keyring tenxgraph.storage.crypto:keyring_from_env``.

    Raises:
        ConfigError: ``CONFIG_001`` when a variable is missing or malformed (the message
            never contains key material).
    """
    import base64
    import binascii

    raw = os.environ.get(KEYS_ENV, "")
    active = os.environ.get(ACTIVE_KEY_ENV, "")
    keys: dict[str, bytes] = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        kid, sep, b64 = part.partition("=")
        if not sep:
            raise ConfigError(
                f"{KEYS_ENV} must hold id=base64key pairs separated by commas",
                context={"key": "cipher", "field": KEYS_ENV},
            )
        try:
            keys[kid.strip()] = base64.b64decode(b64.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(
                f"{KEYS_ENV}: the key of {kid.strip()!r} is not valid base64",
                context={"key": "cipher", "field": KEYS_ENV},
            ) from None
    if not keys or not active:
        raise ConfigError(
            f"set {KEYS_ENV} (id=base64key,...) and {ACTIVE_KEY_ENV} (the id sealing new rows)",
            context={"key": "cipher", "field": KEYS_ENV},
        )
    return Keyring(keys, active=active)


def load_cipher(spec: str) -> Cipher:
    """The cipher named by ``spec``, ``"package.module:attr"``: a :class:`Keyring`, a
    :class:`TenantKeyrings`, or a callable taking no argument that returns one (called once).
    How the ``tenxgraph`` CLI gets keys (``--keyring`` or ``TENXGRAPH_KEYRING``): the keys stay
    in the application's code or secret store, never on the command line.

    Raises:
        ConfigError: ``CONFIG_001`` when ``spec`` is malformed, cannot be imported, or does
            not name a cipher.
    """
    import importlib

    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise ConfigError(
            f"a keyring is named as package.module:attr, got {spec!r}",
            context={"key": "cipher", "field": "keyring"},
        )
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"cannot load the keyring {spec!r}: {type(exc).__name__}: {exc}",
            context={"key": "cipher", "field": "keyring"},
        ) from None
    if (
        callable(obj)
        and not isinstance(obj, (Keyring, TenantKeyrings))
        and not hasattr(obj, "for_user")
    ):
        obj = obj()
    checked = check_cipher(obj)
    if checked is None:
        raise ConfigError(
            f"the keyring {spec!r} is None", context={"key": "cipher", "field": "keyring"}
        )
    return checked
