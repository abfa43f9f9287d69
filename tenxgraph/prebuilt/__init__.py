"""Ready-made tools (10xGraph's ``agentflow.prebuilt``): the handoff tools of
:mod:`tenxgraph.prebuilt.tools`. 10xGraph's prebuilt agents are not part of tenxgraph."""

__all__: list[str] = []
