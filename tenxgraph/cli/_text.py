"""Text for the CLI's tables: stored strings made safe for a terminal and measured in columns.

Thread ids, user ids and messages are stored as given by applications, so they may hold escape
sequences (``ESC [ 2 J`` clears the operator's screen), tabs and newlines (which break rows), or
wide characters (a CJK ideograph takes two terminal columns). ``safe`` shows control characters
as escapes, ``width`` counts terminal columns, ``fit`` cuts to a width with an ellipsis and
``pad`` aligns. ``--json`` output is not passed through here (JSON escapes on its own).
"""

from __future__ import annotations

import unicodedata

__all__ = ["ELLIPSIS", "fit", "pad", "safe", "width"]

#: What ends a cut text (one column wide).
ELLIPSIS = "…"

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return (
        f"\\x{code:02x}"
        if code <= 0xFF
        else f"\\u{code:04x}"
        if code <= 0xFFFF
        else f"\\U{code:08x}"
    )


def safe(text: str) -> str:
    """``text`` with every control, format, surrogate or unassigned character escaped.

    Args:
        text: any stored string.

    Returns:
        The text with ``\\t``, ``\\n``, ``\\r`` written as such and other such characters as
        ``\\xNN`` / ``\\uNNNN`` (so ``ESC`` reads ``\\x1b``); printable text, wide characters
        included, unchanged.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _cols(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def width(text: str) -> int:
    """Terminal columns ``text`` takes (wide and full-width characters count 2, combining
    marks 0); ``text`` is assumed already ``safe``."""
    return sum(_cols(ch) for ch in text)


def fit(text: str, cols: int) -> str:
    """``text`` made safe (so on one line) and cut to at most ``cols`` columns.

    Args:
        text: any stored string (collapse the whitespace of prose before, if wanted).
        cols: the columns available (at least 1 is used).

    Returns:
        ``safe(text)``; when wider than ``cols``, cut so that it plus a final ``…`` takes at
        most ``cols`` columns.
    """
    out = safe(text)
    cols = max(cols, 1)
    if width(out) <= cols:
        return out
    taken, kept = 0, []
    for ch in out:
        w = _cols(ch)
        if taken + w > cols - 1:
            break
        kept.append(ch)
        taken += w
    return "".join(kept) + ELLIPSIS


def pad(text: str, cols: int, *, right: bool = False) -> str:
    """``fit(text, cols)`` padded with spaces to exactly ``cols`` columns.

    Args:
        text: any stored string.
        cols: the column's width.
        right: align right (numbers) instead of left.

    Returns:
        The fitted text and the spaces that make it ``cols`` columns wide.
    """
    shown = fit(text, cols)
    spaces = " " * max(cols - width(shown), 0)
    return spaces + shown if right else shown + spaces
