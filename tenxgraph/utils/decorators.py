"""The ``@tool`` decorator: name, describe, tag or give an explicit schema to a tool function.

Plain functions work in a ``ToolNode`` without it (name from ``__name__``, description and
schema from the docstring and type hints); the decorator only attaches metadata, which
``ToolNode`` reads when it builds the tool's schema. The decorated function is returned
unchanged (same object, still callable directly), with the metadata in its
``__tenxgraph_tool__`` attribute. Compatible with 10xGraph's ``@tool``, including ``tags``,
``provider``, ``capabilities`` and ``metadata``, and its ``get_tool_metadata`` /
``has_tool_decorator`` helpers.

Example::

    @tool
    def add(a: int, b: int) -> int:
        \"\"\"Add two numbers.\"\"\"
        return a + b

    @tool(name="web_search", description="Search the web", tags={"web"})
    async def search(query: str) -> dict: ...
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, overload

__all__ = ["get_tool_metadata", "has_tool_decorator", "tool"]

F = TypeVar("F", bound=Callable[..., Any])

_ATTR = "__tenxgraph_tool__"


@overload
def tool(func: F, /) -> F: ...


@overload
def tool(
    func: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
    tags: Iterable[str] | None = None,
    provider: str | None = None,
    capabilities: Iterable[str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Callable[[F], F]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
    tags: Iterable[str] | None = None,
    provider: str | None = None,
    capabilities: Iterable[str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Any:
    """Mark a function as a tool, optionally overriding what the model sees.

    Usable bare (``@tool``) or with arguments (``@tool(name=...)``).

    Args:
        func: the function (when used bare).
        name: the tool's name for the model (default: the function's ``__name__``).
        description: what the tool does (default: the docstring's description part).
        schema: an explicit JSON schema for the arguments, used as is instead of the one
            generated from type hints. Either the parameters schema (``{"type": "object",
            "properties": ...}``), the ``function`` part of an OpenAI tool spec, or the whole
            spec (``{"type": "function", "function": {...}}``). Arguments are still validated
            against the function's signature before the call.
        tags: labels for ``ToolNode.all_tools(tags=...)`` and ``Agent(tools_tags=...)``.
        provider: where the tool comes from (``"internal"``, ``"mcp"``...), informational.
        capabilities: informational labels (``"async"``, ``"rate_limited"``...).
        metadata: any further JSON-compatible details, informational.

    Returns:
        The function itself (when used bare), or a decorator returning it.

    Raises:
        TypeError: the decorated object is not callable, or ``schema`` is not a dict.
    """
    if schema is not None and not isinstance(schema, dict):
        raise TypeError(
            f"@tool(schema=...) must be a dict (a JSON schema), got {type(schema).__name__}"
        )
    meta: dict[str, Any] = {
        "name": name,
        "description": description,
        "schema": schema,
        "tags": set(tags or ()),
        "provider": provider,
        "capabilities": list(capabilities or ()),
        "metadata": dict(metadata or {}),
    }

    def decorate(f: F) -> F:
        if not callable(f):
            raise TypeError(f"@tool decorates a function, got {type(f).__name__}")
        m = dict(meta)
        if m["name"] is None:
            m["name"] = getattr(f, "__name__", None)
        try:
            setattr(f, _ATTR, m)
        except (AttributeError, TypeError):
            # Objects that refuse attributes (bound methods, builtins): tag a thin forwarding
            # function instead; ``__wrapped__`` keeps the signature and hints visible.
            target = f
            wrapper: Callable[..., Any]
            if inspect.iscoroutinefunction(target):

                async def forward_async(*args: Any, **kwargs: Any) -> Any:
                    return await target(*args, **kwargs)

                wrapper = forward_async
            else:

                def forward(*args: Any, **kwargs: Any) -> Any:
                    return target(*args, **kwargs)

                wrapper = forward

            try:
                functools.update_wrapper(wrapper, target)
            except (AttributeError, TypeError):  # pragma: no cover - exotic callables
                # functions take any attribute; their type does not declare __wrapped__
                wrapper.__wrapped__ = target  # type: ignore[union-attr]
            setattr(wrapper, _ATTR, m)
            return wrapper  # type: ignore[return-value]
        return f

    if func is not None:
        return decorate(func)
    return decorate


def has_tool_decorator(func: Any) -> bool:
    """Whether ``func`` was decorated with :func:`tool`."""
    return isinstance(getattr(func, _ATTR, None), dict)


def get_tool_metadata(func: Any) -> dict[str, Any]:
    """The metadata attached by :func:`tool` (a copy), or ``{}`` for an undecorated function.

    Returns:
        ``{"name", "description", "schema", "tags" (set), "provider", "capabilities" (list),
        "metadata" (dict)}``.
    """
    meta = getattr(func, _ATTR, None)
    return dict(meta) if isinstance(meta, dict) else {}
