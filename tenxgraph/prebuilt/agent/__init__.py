"""10xGraph's prebuilt agents (``agentflow.prebuilt.agent``), each a graph of tenxgraph's own
``Agent`` / ``ToolNode`` nodes built by ``compile(**kwargs)``: :class:`ReactAgent`,
:class:`PlanActReflectAgent`, :class:`StructuredOutputAgent`, :class:`SupervisorTeamAgent`
(with :class:`~tenxgraph.prebuilt.agent.supervisor_team.WorkerConfig`), :class:`SwarmAgent`
(with :class:`~tenxgraph.prebuilt.agent.swarm.SwarmMemberConfig`) and :class:`RAGAgent`."""

from tenxgraph.prebuilt.agent.plan_act_reflect import PlanActReflectAgent
from tenxgraph.prebuilt.agent.rag import RAGAgent
from tenxgraph.prebuilt.agent.react import ReactAgent
from tenxgraph.prebuilt.agent.structured_output import StructuredOutputAgent
from tenxgraph.prebuilt.agent.supervisor_team import SupervisorTeamAgent, WorkerConfig
from tenxgraph.prebuilt.agent.swarm import SwarmAgent, SwarmMemberConfig

__all__ = [
    "PlanActReflectAgent",
    "RAGAgent",
    "ReactAgent",
    "StructuredOutputAgent",
    "SupervisorTeamAgent",
    "SwarmAgent",
    "SwarmMemberConfig",
    "WorkerConfig",
]
