"""Which messages a checkpoint must write: a pure function, no I/O.

The last durable version of a thread is described by a :class:`DurableView`: its message list
(the very objects), their seqs as ranges, and the list's append *lineage* (see
:class:`tenxgraph.core.state.reducers.MessageList`). A new message list is either

* an append-only extension of it (same lineage, longer, same last durable object): the new
  messages are the tail, written with the next seqs, and the last range grows: ``O(k)`` work
  for ``k`` new messages, whatever the thread's length; or
* anything else (``replace_messages``, a node returning a whole state, an edited message):
  every message equal to a durable message with the same ``message_id`` keeps its seq, the rest
  get new seqs; ranges are rebuilt by coalescing consecutive seqs. ``O(n)``, only on such steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenxgraph.core.state.message import Message
from tenxgraph.core.state.reducers import MessageList
from tenxgraph.records import DurableView, Range, expand_ranges

__all__ = ["MessageDiff", "diff_messages"]


@dataclass(slots=True)
class MessageDiff:
    """What to write for a new message list.

    Attributes:
        new: ``(seq, message)`` pairs to insert, in list order.
        ranges: the full new list as seq ranges.
        next_seq: next unused seq after the write.
        appended_only: ``True`` when the fast append path was taken.
    """

    new: list[tuple[int, object]]
    ranges: tuple[Range, ...]
    next_seq: int
    appended_only: bool


def _extend(ranges: tuple[Range, ...], start: int, end: int) -> tuple[Range, ...]:
    if start == end:
        return ranges
    if ranges and ranges[-1][1] == start:
        return ranges[:-1] + ((ranges[-1][0], end),)
    return ranges + ((start, end),)


def _is_append_of(new: list[Message], durable: DurableView) -> bool:
    n = durable.length
    if n == 0:
        return True
    if len(new) < n:
        return False
    old = durable.messages
    if new is old:
        return new[n - 1] is old[n - 1]
    if isinstance(new, MessageList) and isinstance(old, MessageList) and new.lineage is old.lineage:
        # Same lineage: ``new`` extends ``old`` (checked at both ends, O(1)).
        return new[n - 1] is old[n - 1] and new[0] is old[0]
    return False


def diff_messages(durable: DurableView, new: list[Message]) -> MessageDiff:
    """Compute the rows and ranges a checkpoint writes for message list ``new``.

    Args:
        durable: the last durable version's view (:meth:`DurableView.empty` for a new thread).
        new: the state's message list now, oldest first.

    Returns:
        A :class:`MessageDiff`; applying it to the durable rows reproduces ``new`` exactly.
    """
    if _is_append_of(new, durable):
        start = durable.next_seq
        tail = new[durable.length :]
        appended: list[tuple[int, object]] = [(start + i, m) for i, m in enumerate(tail)]
        end = start + len(tail)
        return MessageDiff(appended, _extend(durable.ranges, start, end), end, True)

    # General path: reuse the seq of every unchanged durable message.
    by_id: dict[str | int, tuple[int, Message]] = {}
    for seq, msg in zip(expand_ranges(durable.ranges), durable.messages, strict=False):
        by_id[msg.message_id] = (seq, msg)
    next_seq = durable.next_seq
    rows: list[tuple[int, object]] = []
    seqs: list[int] = []
    used: set[int] = set()
    for msg in new:
        hit = by_id.get(msg.message_id)
        if hit is not None and hit[0] not in used and (hit[1] is msg or hit[1] == msg):
            seqs.append(hit[0])
            used.add(hit[0])
        else:
            seqs.append(next_seq)
            rows.append((next_seq, msg))
            next_seq += 1
    ranges: list[Range] = []
    for s in seqs:
        if ranges and ranges[-1][1] == s:
            ranges[-1] = (ranges[-1][0], s + 1)
        else:
            ranges.append((s, s + 1))
    return MessageDiff(rows, tuple(ranges), next_seq, False)
