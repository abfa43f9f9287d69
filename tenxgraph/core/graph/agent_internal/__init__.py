"""Agent configuration objects (10xGraph's ``agentflow.core.graph.agent_internal``)."""

from .constants import RetryConfig

__all__ = ["RetryConfig"]
