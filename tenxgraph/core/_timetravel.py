"""Time travel for a compiled graph: read, rewind and fork a thread at any kept version.

The graph methods (:meth:`CompiledGraph.aget_state(config, version=N)
<tenxgraph.core.graph.compiled_graph.CompiledGraph.aget_state>`, ``arewind``, ``afork`` and
their sync twins) call these functions; the storage side (the compare-and-swap rewind write,
the fork copied inside the store) is the checkpointer's (``aload_version``, ``arewind``,
``afork``; pure pieces in :mod:`tenxgraph.storage._fork`). What lives here is what needs the
runtime: applying an ``update=`` to the forked state exactly as ``update_state`` applies one
(through each field's reducer).

Side effects (docs/how-to/time-travel.md): a rewound or forked thread that replays a tool call
(the same call of the same assistant message) gets the ledger's recorded answer; a fork starts
with a copy of its source's ledger. ``config["replay_tools"] = True`` runs such calls again
under a new idempotency key (see :mod:`tenxgraph.core.graph.tool_node`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tenxgraph.core import _runner
from tenxgraph.core.config import normalize_config
from tenxgraph.core.state import AgentState

if TYPE_CHECKING:
    from tenxgraph.core.graph.compiled_graph import CompiledGraph

__all__ = ["afork", "aget_state_at", "arewind", "edit_for"]


def edit_for(update: Any, node: str = "__fork__") -> Callable[[AgentState], AgentState] | None:
    """The edit that applies ``update`` to a state as ``update_state`` would (``None`` when
    ``update`` is ``None``).

    Args:
        update: anything a node may return (a ``dict`` of field updates, messages, a state,
            ``Command(update=...)``).
        node: the name reported in errors about the value.

    Returns:
        A function ``state -> new state`` (the argument is not modified).
    """
    if update is None:
        return None

    def edit(state: AgentState) -> AgentState:
        changes, _ = _runner.normalize_return(update, state, node)
        new_state, _ = _runner.apply_update(state, changes)
        return new_state

    return edit


async def aget_state_at(
    app: CompiledGraph[Any], config: dict[str, Any], version: int
) -> AgentState:
    """The thread's state exactly as it was at kept version ``version``.

    Records the head version it saw in ``config["_checkpoint_version"]``, as ``get_state``
    does.

    Raises:
        ValidationError: ``VALIDATION_000`` when ``version`` is not an ``int`` from 1 to
            ``2**63 - 1``, before any I/O.
        ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` naming the oldest kept version when
            ``version`` is not kept.
    """
    cfg = dict(config or {})
    normalize_config(cfg, new_run=False)
    loaded = await app.checkpointer.aload_version(cfg, version, app.state_class)
    if config is not None:
        # As a plain get_state does: the head seen, so the next rewind compares against it.
        config["_checkpoint_version"] = cfg["_checkpoint_version"]
    return loaded.state


async def arewind(app: CompiledGraph[Any], config: dict[str, Any], to_version: int) -> AgentState:
    """Write a new head of the thread equal to kept version ``to_version`` (see
    ``BaseCheckpointer.arewind``); ``config["_checkpoint_version"]`` becomes the new head."""
    cfg = config if config is not None else {}
    loaded = await app.checkpointer.arewind(cfg, to_version, app.state_class)
    return loaded.state


async def afork(
    app: CompiledGraph[Any],
    config: dict[str, Any],
    at_version: int,
    to_thread_id: str,
    update: Any = None,
) -> dict[str, Any]:
    """Create thread ``to_thread_id`` from kept version ``at_version`` of the config's thread,
    with ``update`` applied as ``update_state`` would (see ``BaseCheckpointer.afork``); returns
    the fork's config."""
    cfg = dict(config or {})
    return await app.checkpointer.afork(
        cfg, at_version, to_thread_id, state_cls=app.state_class, edit=edit_for(update)
    )
