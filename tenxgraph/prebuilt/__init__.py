"""Ready-made pieces (10xGraph's ``agentflow.prebuilt``): the prebuilt agents of
:mod:`tenxgraph.prebuilt.agent` and the tools of :mod:`tenxgraph.prebuilt.tools` (handoff
tools, ``fetch_url``, ``google_web_search``)."""

from tenxgraph.prebuilt.agent import (
    PlanActReflectAgent,
    RAGAgent,
    ReactAgent,
    StructuredOutputAgent,
    SupervisorTeamAgent,
    SwarmAgent,
)

__all__ = [
    "PlanActReflectAgent",
    "RAGAgent",
    "ReactAgent",
    "StructuredOutputAgent",
    "SupervisorTeamAgent",
    "SwarmAgent",
]
