"""Assign a run's ids through the graph's id generator (``StateGraph(id_generator=...)``)."""

from __future__ import annotations

from typing import Any

from tenxgraph.core.config import RunConfig, normalize_config
from tenxgraph.utils.id_generator import BaseIDGenerator, generate_id

__all__ = ["prepare_run_config"]


def _thread_given(cfg: dict[str, Any]) -> bool:
    if cfg.get("thread_id") is not None:
        return True
    sub = cfg.get("configurable")
    return isinstance(sub, dict) and sub.get("thread_id") is not None


async def prepare_run_config(cfg: dict[str, Any], generator: BaseIDGenerator | None) -> RunConfig:
    """Validate ``cfg`` for a new invocation and give it its ids.

    Without a generator this is ``normalize_config(cfg, require_thread=False)`` (uuid4 ids).
    With one, a missing ``thread_id`` and the ``run_id`` of each new invocation (absent, or
    the one generated for an earlier run of the same dict) come from the generator, as text.

    Args:
        cfg: the caller's config dict; updated in place.
        generator: the graph's id generator, or ``None``.

    Returns:
        The validated view of ``cfg`` (with its ids), for the run to use as it is.

    Raises:
        ConfigError: ``CONFIG_001`` for a bad config, or a generated id a storage tier could
            not keep (over 255 characters, NUL).
        GraphError: ``GRAPH_001`` when the generator returns neither ``str`` nor ``int``.
    """
    if generator is None:
        return normalize_config(cfg, require_thread=False)
    need_thread = not _thread_given(cfg)
    need_run = not cfg.get("run_id") or cfg.get("run_id") == cfg.get("_run_id_auto")
    normalize_config(cfg, require_thread=False)
    if need_thread:
        cfg["thread_id"] = await generate_id(generator)
    if need_run:
        cfg["run_id"] = cfg["_run_id_auto"] = await generate_id(generator)
    return normalize_config(cfg, require_thread=False, new_run=False)
