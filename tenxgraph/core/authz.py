"""The authorization block a server stamps into a run's config, and how the core reads it.

An API layer that has authenticated a caller puts ``{"user_id", "scope", "scopes"}`` under
``config["user"]["authz"]`` (trusted: the server writes it after its own checks). Code calling
tenxgraph directly may pass the same block at ``config["authz"]``; the trusted block always wins,
so a client cannot widen its rights by adding a top-level block to a request's config. This
follows 10xGraph's ``config["authz"]`` contract (``docs/compat-10xgraph.md``).

``scope`` says how storage isolates data: ``"owner"`` (every read/write is limited to the
caller's rows) or ``"none"`` (no per-user scoping). ``scopes`` lists the ``"resource:action"``
permissions granted; ``None`` means unrestricted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "CHECKPOINT_DELETE",
    "CHECKPOINT_READ",
    "CHECKPOINT_WRITE",
    "GRAPH_INVOKE",
    "GRAPH_READ",
    "GRAPH_STOP",
    "GRAPH_STREAM",
    "SCOPE_NONE",
    "SCOPE_OWNER",
    "STORE_DELETE",
    "STORE_READ",
    "STORE_WRITE",
    "build_authz",
    "get_authz",
    "has_scope",
    "isolation_scope",
]

SCOPE_OWNER = "owner"
SCOPE_NONE = "none"
_ISOLATION_SCOPES = frozenset({SCOPE_OWNER, SCOPE_NONE})

GRAPH_INVOKE = "graph:invoke"
GRAPH_STREAM = "graph:stream"
GRAPH_READ = "graph:read"
GRAPH_STOP = "graph:stop"
CHECKPOINT_READ = "checkpointer:read"
CHECKPOINT_WRITE = "checkpointer:write"
CHECKPOINT_DELETE = "checkpointer:delete"
STORE_READ = "store:read"
STORE_WRITE = "store:write"
STORE_DELETE = "store:delete"


def build_authz(
    user_id: str, scope: str = SCOPE_OWNER, scopes: Iterable[str] | None = None
) -> dict[str, Any]:
    """Make an authorization block.

    Args:
        user_id (str): the caller.
        scope (str): ``"owner"`` or ``"none"``; any other value becomes ``"none"`` (the block
            then grants no isolation, and the caller's ``scopes`` still limit what it may do).
        scopes (Iterable[str] | None): granted ``"resource:action"`` permissions; ``None`` for
            unrestricted.

    Returns:
        dict: ``{"user_id", "scope", "scopes"}``.
    """
    return {
        "user_id": user_id,
        "scope": scope if scope in _ISOLATION_SCOPES else SCOPE_NONE,
        "scopes": None if scopes is None else list(scopes),
    }


def get_authz(config: Any) -> dict[str, Any] | None:
    """The authorization block of a run config.

    Args:
        config (Any): a run config (normally a dict); anything else has no block.

    Returns:
        dict | None: ``config["user"]["authz"]`` when it is a dict, else ``config["authz"]``
        when that is a dict, else ``None``.
    """
    if not isinstance(config, Mapping):
        return None
    user = config.get("user")
    if isinstance(user, Mapping) and isinstance(user.get("authz"), Mapping):
        return dict(user["authz"])
    block = config.get("authz")
    return dict(block) if isinstance(block, Mapping) else None


def isolation_scope(config: Any) -> str | None:
    """The storage isolation the config asks for.

    Args:
        config (Any): a run config.

    Returns:
        str | None: ``"owner"`` or ``"none"``; ``None`` when there is no block or its scope is
        not one of those.
    """
    block = get_authz(config)
    scope = block.get("scope") if block else None
    return scope if scope in _ISOLATION_SCOPES else None


def has_scope(config: Any, required: str) -> bool:
    """Whether the config's block grants a ``"resource:action"`` permission.

    Args:
        config (Any): a run config.
        required (str): the permission, e.g. ``GRAPH_INVOKE``.

    Returns:
        bool: True without a block or with ``scopes=None`` (direct library use is unrestricted);
        otherwise whether ``required`` is listed (``"*"`` grants all).
    """
    block = get_authz(config)
    if block is None:
        return True
    scopes = block.get("scopes")
    if scopes is None:
        return True
    if not isinstance(scopes, (list, tuple, set, frozenset)):
        return False
    return required in scopes or "*" in scopes
