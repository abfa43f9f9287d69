"""Reducers: how a node's partial update merges into a state field.

A field declares its reducer with ``Annotated[type, reducer]``; a field without one is replaced
(:func:`replace_value`). The idea and names follow 10xGraph (and LangGraph's ``add_messages``).

``add_messages`` keeps a private id index on the list it returns (:class:`MessageList`), so
appending ``k`` messages costs ``O(k)`` Python work however long the thread is; the index and the
list's *lineage* also let the store write only the appended messages (diff-only writes).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MessageList", "add_messages", "append_items", "replace_messages", "replace_value"]


class MessageList(list):
    """A ``list[Message]`` that remembers its message ids and its append lineage.

    Two ``MessageList`` s with the same ``lineage`` token are append-only extensions of one
    another (the shorter is a prefix of the longer) as long as they were produced by
    :func:`add_messages`. Any other list operation returns a plain ``list``.
    """

    __slots__ = ("_ids", "lineage")

    def __init__(self, items: Any = (), ids: set | None = None, lineage: object | None = None):
        super().__init__(items)
        self._ids: set = ids if ids is not None else {m.message_id for m in self}
        self.lineage: object = lineage if lineage is not None else object()

    def ids(self) -> set:
        """The set of message ids in the list (do not mutate)."""
        return self._ids


def add_messages(left: list | None, right: Any) -> list:
    """Append ``right`` to ``left``, skipping known ids and streaming deltas.

    Args:
        left: the current messages (oldest first).
        right: a ``Message`` or a list of them.

    Returns:
        ``left`` itself when nothing is new; else a new :class:`MessageList`, oldest first, ids
        unique: ``left`` followed by the messages of ``right`` whose ``message_id`` is not in
        ``left`` (nor earlier in ``right``) and whose ``delta`` is false.
    """
    left = left if left is not None else []
    if right is None:
        return left
    if not isinstance(right, (list, tuple)):
        right = [right]
    if isinstance(left, MessageList):
        ids, lineage = left._ids, left.lineage
    else:
        ids, lineage = {m.message_id for m in left}, object()
    new: list = []
    new_ids: set = set()
    for m in right:
        if getattr(m, "delta", False):
            continue
        mid = m.message_id
        if mid in ids or mid in new_ids:
            continue
        new_ids.add(mid)
        new.append(m)
    if not new:
        return left
    out = MessageList((), ids=ids | new_ids, lineage=lineage)
    out.extend(left)
    out.extend(new)
    return out


def replace_messages(left: list | None, right: Any) -> list:
    """Replace the whole message list with ``right`` (for trimming or summarizing).

    Returns a new :class:`MessageList` with a fresh lineage, so the store compares it with the
    last durable list message by message (unchanged messages are not written again).
    """
    if right is None:
        right = []
    if not isinstance(right, (list, tuple)):
        right = [right]
    return MessageList(right)


def append_items(left: list | None, right: Any) -> list:
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
