"""Id generators: the format of the thread ids and run ids a graph makes up.

``StateGraph(id_generator=...)`` takes one of these (10xGraph's graph reference). When a run's
config has no ``thread_id`` (a new thread) or no ``run_id`` (every new invocation), the graph
asks the generator for one; the value is stored as its decimal / text form, because every
storage tier keys threads by text (an ``int`` id ``42`` is the thread ``"42"``). A generator
returning ``""`` (``DefaultIDGenerator``) leaves the choice to tenxgraph: a uuid4 string.

Message ids are not taken from the generator: a message gets its id when it is built, often
outside any graph, and ``Message.message_id`` stays a uuid4 unless the caller sets one.
"""

from __future__ import annotations

import enum
import inspect
import secrets
import string
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from typing import Any

from tenxgraph._uuid import uuid4_hex, uuid4_str
from tenxgraph.core.exceptions import GraphError

__all__ = [
    "AsyncIDGenerator",
    "BaseIDGenerator",
    "BigIntIDGenerator",
    "DefaultIDGenerator",
    "HexIDGenerator",
    "IDType",
    "IntIDGenerator",
    "ShortIDGenerator",
    "TimestampIDGenerator",
    "UUIDGenerator",
    "generate_id",
    "uuid4_hex",
    "uuid4_str",
]


class IDType(enum.StrEnum):
    """What a generator's ids are: ``STRING`` (``str``), ``INTEGER`` (``int``, up to 32 bits
    or a microsecond timestamp) or ``BIGINT`` (``int``, 64-bit range)."""

    STRING = "string"
    INTEGER = "integer"
    BIGINT = "bigint"


class BaseIDGenerator(ABC):
    """Base of every id generator: subclasses give ``id_type`` and ``generate()``.

    ``generate()`` may return the id or an awaitable of it; the graph awaits the latter.
    """

    @property
    @abstractmethod
    def id_type(self) -> IDType:
        """The kind of id ``generate()`` returns.

        Returns:
            An ``IDType`` member.
        """

    @abstractmethod
    def generate(self) -> str | int | Awaitable[str | int]:
        """A new id.

        Returns:
            ``str`` or ``int`` (or an awaitable of one); ``""`` means "use tenxgraph's
            default" (a uuid4 string).
        """


class AsyncIDGenerator(BaseIDGenerator):
    """Base for generators that need I/O (a database sequence, an id service):
    ``generate`` is an ``async def``."""

    @abstractmethod
    async def generate(self) -> str | int:
        """A new id, awaited by the graph.

        Returns:
            ``str`` or ``int``.
        """


class DefaultIDGenerator(BaseIDGenerator):
    """Returns ``""``: tenxgraph then uses its default, a uuid4 string."""

    @property
    def id_type(self) -> IDType:
        """``IDType.STRING``."""
        return IDType.STRING

    def generate(self) -> str:
        """Returns:
        ``""`` (the graph substitutes a uuid4 string)."""
        return ""


class UUIDGenerator(BaseIDGenerator):
    """Random UUID version 4, 36 characters with hyphens."""

    @property
    def id_type(self) -> IDType:
        """``IDType.STRING``."""
        return IDType.STRING

    def generate(self) -> str:
        """Returns:
        a new uuid4 string such as ``"0b7e3c1a-5d2f-4e8b-9a61-2c4f8d7e1b30"``."""
        return uuid4_str()


class BigIntIDGenerator(BaseIDGenerator):
    """Nanoseconds since the UNIX epoch (19 digits today): time-ordered, fits a Postgres
    ``bigint``. Strictly increasing within one generator, even when two calls fall in the
    same nanosecond."""

    def __init__(self) -> None:
        self._last = 0

    @property
    def id_type(self) -> IDType:
        """``IDType.BIGINT``."""
        return IDType.BIGINT

    def generate(self) -> int:
        """Returns:
        ``time.time_ns()``, or the previous id + 1 when the clock has not moved on."""
        now = time.time_ns()
        self._last = now if now > self._last else self._last + 1
        return self._last


class TimestampIDGenerator(BaseIDGenerator):
    """Microseconds since the UNIX epoch (16 digits today): sortable, smaller than
    ``BigIntIDGenerator``'s ids. Strictly increasing within one generator."""

    def __init__(self) -> None:
        self._last = 0

    @property
    def id_type(self) -> IDType:
        """``IDType.INTEGER``."""
        return IDType.INTEGER

    def generate(self) -> int:
        """Returns:
        ``time.time_ns() // 1000``, or the previous id + 1 when the clock has not moved on."""
        now = time.time_ns() // 1000
        self._last = now if now > self._last else self._last + 1
        return self._last


class IntIDGenerator(BaseIDGenerator):
    """A random non-negative 32-bit integer (``secrets``): compact, but collisions become
    likely after tens of thousands of ids."""

    @property
    def id_type(self) -> IDType:
        """``IDType.INTEGER``."""
        return IDType.INTEGER

    def generate(self) -> int:
        """Returns:
        an ``int`` in ``[0, 2**31 - 1]``."""
        return secrets.randbelow(2**31)


class HexIDGenerator(BaseIDGenerator):
    """32 lowercase hexadecimal characters (16 random bytes), no hyphens."""

    @property
    def id_type(self) -> IDType:
        """``IDType.STRING``."""
        return IDType.STRING

    def generate(self) -> str:
        """Returns:
        a 32-character hex string."""
        return secrets.token_hex(16)


_ALPHABET = string.ascii_letters + string.digits


class ShortIDGenerator(BaseIDGenerator):
    """8 characters from ``[A-Za-z0-9]`` (62**8, about 2.2e14 values): readable codes for
    URLs and logs, not for high-volume primary keys."""

    @property
    def id_type(self) -> IDType:
        """``IDType.STRING``."""
        return IDType.STRING

    def generate(self) -> str:
        """Returns:
        an 8-character alphanumeric string."""
        return "".join(secrets.choice(_ALPHABET) for _ in range(8))


async def generate_id(generator: BaseIDGenerator | None) -> str:
    """One id from ``generator`` as the text tenxgraph stores.

    Args:
        generator: an id generator, or ``None`` for tenxgraph's default.

    Returns:
        The id as ``str`` (an ``int`` as its decimal form); a uuid4 string when
        ``generator`` is ``None`` or returned ``""``.

    Raises:
        GraphError: ``GRAPH_001`` when the generator returns something other than a
            ``str`` or ``int`` (or an awaitable of one).
    """
    if generator is None:
        return uuid4_str()
    value: Any = generator.generate()
    if inspect.isawaitable(value):
        value = await value
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise GraphError(
            f"{type(generator).__name__}.generate() returned {type(value).__name__}; an id "
            "generator must return a str or an int",
            error_code="GRAPH_001",
            context={"generator": type(generator).__name__},
        )
    text = str(value)
    return text if text else uuid4_str()
