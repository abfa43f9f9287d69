"""Prebuilt tools (10xGraph's ``agentflow.prebuilt.tools``): the handoff tools of
:mod:`tenxgraph.prebuilt.tools.handoff`, importable from either path as 10xGraph documents."""

from tenxgraph.prebuilt.tools.handoff import HANDOFF_PREFIX, create_handoff_tool, is_handoff_tool

__all__ = ["HANDOFF_PREFIX", "create_handoff_tool", "is_handoff_tool"]
