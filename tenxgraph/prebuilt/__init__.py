"""Ready-made pieces (10xGraph's ``agentflow.prebuilt``): :class:`ReactAgent`
(:mod:`tenxgraph.prebuilt.agent`) and the handoff tools of :mod:`tenxgraph.prebuilt.tools`.
10xGraph's other prebuilt agents are not part of tenxgraph."""

from tenxgraph.prebuilt.agent import ReactAgent

__all__ = ["ReactAgent"]
