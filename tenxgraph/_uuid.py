"""Fast random UUID version 4 strings (a leaf module: importable from anywhere in the package).

``str(uuid.uuid4())`` spends most of its ~10 microseconds (on the reference VM) in
``UUID.__init__`` and ``__str__``; these take ~2: the same 122 bits from ``os.urandom`` (a fresh
read per id, so ids stay unique across ``fork``) with the version (4) and variant (RFC 4122)
bits set, formatted directly. Re-exported by :mod:`tenxgraph.utils.id_generator`.
"""

from __future__ import annotations

import os

__all__ = ["uuid4_hex", "uuid4_str"]

_CLEAR = ((1 << 128) - 1) & ~(0xF000 << 64) & ~(0xC000 << 48)
_SET = (0x4000 << 64) | (0x8000 << 48)
_from_bytes = int.from_bytes
_urandom = os.urandom


def uuid4_hex() -> str:
    """A random UUID version 4 as 32 lowercase hex digits, like ``uuid.uuid4().hex``.

    Returns:
        e.g. ``"0b7e3c1a5d2f4e8b9a612c4f8d7e1b30"``.
    """
    return "%032x" % ((_from_bytes(_urandom(16)) & _CLEAR) | _SET)


def uuid4_str() -> str:
    """A random UUID version 4 in its canonical 36-character form, like ``str(uuid.uuid4())``.

    Returns:
        e.g. ``"0b7e3c1a-5d2f-4e8b-9a61-2c4f8d7e1b30"``.
    """
    h = "%032x" % ((_from_bytes(_urandom(16)) & _CLEAR) | _SET)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
