"""tenxgraph: an async-first, embedded runtime for multi-turn agent graphs with durable,
concurrency-safe checkpoints. A new implementation of 10xGraph's public API.

Public entry points live in their modules, as in 10xGraph::

    from tenxgraph.core.graph import StateGraph, Agent, ToolNode
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer, PgCheckpointer
    from tenxgraph.utils import START, END, Command, ResponseGranularity, tool
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
