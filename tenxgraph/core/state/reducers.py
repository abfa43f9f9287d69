"""Reducers: how a node's partial update merges into a state field.

A field declares its reducer with ``Annotated[type, reducer]``; a field without one is replaced
(:func:`replace_value`). The idea and names follow 10xGraph (and LangGraph's ``add_messages``).

``add_messages`` keeps an id index shared by the lists of one append *lineage*
(:class:`MessageList`), so appending ``k`` messages costs ``O(k)`` Python work however long the
thread is; the lineage also lets the store write only the appended messages (diff-only writes).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Re-exported: 10xGraph's custom-state guide imports ``Message`` from this module.
from .message import Message

__all__ = [
    "Message",
    "MessageList",
    "add_messages",
    "append_items",
    "replace_messages",
    "replace_value",
]


class _Lineage:
    """What a family of append-only message lists shares: the position of each message id and
    the length of the longest list (the *tip*). Appending to the tip updates it in place, so
    ``add_messages`` never copies the id index."""

    __slots__ = ("pos", "tip")

    def __init__(self, pos: dict[str | int, int], tip: int) -> None:
        self.pos = pos
        self.tip = tip


class MessageList(list[Message]):
    """A ``list[Message]`` that knows its message ids through its append *lineage*.

    Lists that share a ``lineage`` are append-only extensions of one another (the shorter is a
    prefix of the longer): :func:`add_messages` extends a lineage only from its tip, and forks
    a new one (copying the index once) when asked to extend an older list. Any other list
    operation returns a plain ``list``.
    """

    __slots__ = ("lineage",)

    def __init__(self, items: Iterable[Message] = (), lineage: _Lineage | None = None) -> None:
        super().__init__(items)
        if lineage is None:
            pos: dict[str | int, int] = {}
            for i, m in enumerate(self):
                pos.setdefault(m.message_id, i)
            lineage = _Lineage(pos, len(self))
        self.lineage: _Lineage = lineage

    def has_id(self, message_id: Any) -> bool:
        """Whether a message with ``message_id`` is in this list (``O(1)``)."""
        i = self.lineage.pos.get(message_id)
        return i is not None and i < len(self)


def add_messages(left: list[Message] | None, right: Any) -> list[Message]:
    """Append ``right`` to ``left``, skipping known ids and streaming deltas.

    Args:
        left: the current messages (oldest first).
        right: a ``Message`` or a list of them.

    Returns:
        ``left`` itself when nothing is new; else a new :class:`MessageList`, oldest first, ids
        unique: ``left`` followed by the messages of ``right`` whose ``message_id`` is not in
        ``left`` (nor earlier in ``right``) and whose ``delta`` is false. Costs ``O(k)`` for
        ``k`` new messages plus one pointer copy of ``left``, whatever its length.
    """
    left = left if left is not None else []
    if right is None:
        return left
    if not isinstance(right, (list, tuple)):
        right = [right]
    n = len(left)
    if isinstance(left, MessageList):
        lineage = left.lineage
        if lineage.tip != n:
            # ``left`` is not the newest list of its lineage: fork, keeping its own ids only.
            lineage = _Lineage({k: i for k, i in lineage.pos.items() if i < n}, n)
    else:
        lineage = MessageList(left).lineage
    pos = lineage.pos
    if len(right) == 1:  # a node's usual update: one message (no set, no second loop)
        m = right[0]
        if getattr(m, "delta", False) or (mid := m.message_id) in pos:
            return left
        pos[mid] = n
        lineage.tip = n + 1
        one = _new_list(MessageList)  # MessageList.__init__ would index the items again
        one.lineage = lineage
        one.extend(left)
        one.append(m)
        return one
    new: list[Message] = []
    seen: set[str | int] = set()
    for m in right:
        if getattr(m, "delta", False):
            continue
        mid = m.message_id
        if mid in pos or mid in seen:
            continue
        seen.add(mid)
        new.append(m)
    if not new:
        return left
    for j, m in enumerate(new):
        pos[m.message_id] = n + j
    lineage.tip = n + len(new)
    out = _new_list(MessageList)
    out.lineage = lineage
    out.extend(left)
    out.extend(new)
    return out


#: ``list.__new__``: an empty ``MessageList`` without its Python ``__init__`` (the caller sets
#: ``lineage`` before anything reads it).
_new_list = list.__new__


def replace_messages(left: list[Message] | None, right: Any) -> list[Message]:
    """Replace the whole message list with ``right`` (for trimming or summarizing).

    Returns a new :class:`MessageList` with a fresh lineage, so the store compares it with the
    last durable list message by message (unchanged messages are not written again).
    """
    if right is None:
        right = []
    if not isinstance(right, (list, tuple)):
        right = [right]
    return MessageList(right)


def append_items(left: list[Any] | None, right: Any) -> list[Any]:
    """Append items of ``right`` whose ``id`` (attribute or ``"id"`` key) is not in ``left``.

    Items without an id are always appended. Returns a new list.
    """
    left = list(left or [])
    if right is None:
        return left
    if not isinstance(right, (list, tuple)):
        right = [right]

    def _id(item: Any) -> Any:
        if isinstance(item, dict):
            return item.get("id")
        return getattr(item, "id", None)

    seen = {i for i in map(_id, left) if i is not None}
    for item in right:
        key = _id(item)
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        left.append(item)
    return left


def replace_value(left: Any, right: Any) -> Any:
    """Always take the new value (the default for fields without a reducer)."""
    return right
