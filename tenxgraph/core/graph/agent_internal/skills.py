"""``AgentSkillsMixin``: how an agent sets up skills and what they add to its prompt
(10xGraph 0.10.3's ``agent_internal.skills``).

``mode="on-demand"``: when skills are found, the agent's tool node gets ``activate_skill``
(and ``read_skill_resource`` when any skill bundles files), and every model request carries
the catalog (:func:`~tenxgraph.core.skills.activation.build_catalog_prompt`) after the system
prompt, unless ``inject_catalog=False`` (the list then goes into ``activate_skill``'s
description). A skill activated earlier in the run whose text is no longer in the
conversation is sent again as a system message.

``mode="session"``: the skill named by the state field ``preload_from`` is sent as a system
message on every request; no catalog and no ``activate_skill``. ``read_skill_resource`` is
added when skills bundle files and the agent has a tool node. An empty or missing field, or a
name no skill has, sends nothing (the latter logs a warning).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.skills.activation import (
    SKILL_TOOL_ATTR,
    build_catalog_prompt,
    format_skill_content,
    get_active_skills,
    make_activate_skill_tool,
    make_read_skill_resource_tool,
    skill_content_marker,
)
from tenxgraph.core.skills.models import SkillConfig
from tenxgraph.core.skills.registry import SkillsRegistry

from ..tool_node import ToolNode

__all__ = ["SKILL_TOOL_NAMES", "AgentSkillsMixin", "SkillsToolNodeError"]

log = logging.getLogger("tenxgraph.skills")

#: The tools skills add to a tool node.
SKILL_TOOL_NAMES = ("activate_skill", "read_skill_resource")


class SkillsToolNodeError(GraphError, RuntimeError):
    """On-demand skills were found but the agent has no tool node to run ``activate_skill``
    (``GRAPH_001``; ``context["parameter"] == "skills"``)."""

    default_code = "GRAPH_001"


class AgentSkillsMixin:
    """Skills for an agent class (``tenxgraph.core.graph.Agent`` uses it).

    The agent tells the mixin its tool node through :meth:`_skills_tool_node` (default: the
    attribute ``_tool_node``) or the name of the graph's tool node through
    :meth:`_skills_tool_node_name` (default: the attribute ``tool_node_name``); with only a
    name, the skill tools wait in ``_extra_tools`` until the node is known.

    Attributes:
        _skills_config (SkillConfig | None): the configuration given.
        _skills_registry (SkillsRegistry | None): the skills found (``None`` when disabled).
        _skill_catalog_prompt (str | None): the catalog system message (on-demand, with
            ``inject_catalog`` and at least one skill).
    """

    _tool_node: ToolNode | None = None
    tool_node_name: str | None = None
    _skills_config: SkillConfig | None = None
    _skills_registry: SkillsRegistry | None = None
    _skill_catalog_prompt: str | None = None
    _skills_can_read: bool = False
    _skill_names: tuple[str, ...] = ()

    def _skills_tool_node(self) -> ToolNode | None:
        """The tool node the skill tools go into, when the agent holds one."""
        return self._tool_node

    def _skills_tool_node_name(self) -> str | None:
        """The name of the graph's tool node, when the agent refers to one by name."""
        return self.tool_node_name

    def _setup_skills(self, config: SkillConfig | None) -> None:
        """Find the skills of ``config`` and add their tools (module docstring).

        Args:
            config: the configuration; ``None`` (or no ``skills_dir``) disables skills.

        Raises:
            TypeError: ``config`` is not a ``SkillConfig``.
            SkillsToolNodeError: ``GRAPH_001`` on-demand skills were found and the agent has
                neither a tool node nor the name of one.
        """
        self._skills_config = None
        self._skills_registry = None
        self._skill_catalog_prompt = None
        self._skills_can_read = False
        if config is None:
            return
        if not isinstance(config, SkillConfig):
            raise TypeError(
                f"Expected SkillConfig for skills=, got {type(config).__name__}; use "
                "tenxgraph.core.skills.SkillConfig(skills_dir=...)"
            )
        self._skills_config = config
        if not config.skill_dirs:
            return
        registry = SkillsRegistry()
        registry.discover(config.skill_dirs)
        self._skills_registry = registry
        self._install_skill_tools(strict=True)

    def _install_skill_tools(self, strict: bool) -> None:
        cfg, registry = self._skills_config, self._skills_registry
        assert cfg is not None and registry is not None
        self._skill_names = tuple(registry.names())
        has_files = any(registry.list_files(n, limit=1)[0] for n in registry.names())
        node, name = self._skills_tool_node(), self._skills_tool_node_name()
        tools: list[Callable[..., Any]] = []
        self._skill_catalog_prompt = None
        if cfg.mode == "on-demand":
            if not len(registry):
                return
            if node is None and name is None:
                err = SkillsToolNodeError(
                    "Skills require an existing ToolNode to run activate_skill: pass "
                    "tool_node=ToolNode([...]) or the name of the graph's ToolNode (or use "
                    "SkillConfig(mode='session'))",
                    context={"parameter": "skills"},
                )
                if strict:
                    raise err
                log.warning("skills: %s", err.message)
                return
            tools.append(
                make_activate_skill_tool(
                    registry, cfg, embed_catalog=not cfg.inject_catalog, can_read_files=has_files
                )
            )
            if has_files:
                tools.append(make_read_skill_resource_tool(registry, cfg))
            if cfg.inject_catalog:
                self._skill_catalog_prompt = build_catalog_prompt(
                    registry, can_read_files=has_files
                )
        elif has_files and (node is not None or name is not None):
            tools.append(make_read_skill_resource_tool(registry, cfg))
        self._skills_can_read = bool(tools) and has_files
        if node is not None:
            for tool in tools:
                _put_tool(node, tool)
        elif tools:
            self._extra_tools = tools

    def _attach_skill_tools(self, node: ToolNode) -> None:
        """Put the skill tools waiting in ``_extra_tools`` into ``node`` (the graph's tool
        node, once the agent knows it); tools of an earlier reload are replaced."""
        for tool in getattr(self, "_extra_tools", None) or ():
            _put_tool(node, tool)

    def _reload_skills(self) -> None:
        """Hot reload: read the skill directories again; rebuild the tools and the catalog
        when the set of skills changed."""
        cfg, registry = self._skills_config, self._skills_registry
        if cfg is None or registry is None:
            return
        registry.refresh(cfg.skill_dirs)
        if tuple(registry.names()) != self._skill_names:
            self._install_skill_tools(strict=False)
        elif self._skill_catalog_prompt is not None:
            self._skill_catalog_prompt = build_catalog_prompt(
                registry, can_read_files=self._skills_can_read
            )

    def _build_skill_prompts(
        self, state: Any, prompts: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """``prompts`` (system messages as ``{"role", "content"}`` dicts) followed by what
        skills add for ``state`` (module docstring); ``prompts`` itself is not changed.

        Args:
            state: the graph state (any object; ``None`` allowed).
            prompts: the messages so far.

        Returns:
            A new list.
        """
        out = list(prompts)
        cfg, registry = self._skills_config, self._skills_registry
        if cfg is None or registry is None:
            return out
        if cfg.hot_reload:
            self._reload_skills()
        if cfg.mode == "session":
            field = cfg.preload_from
            name = getattr(state, field, None) if state is not None and field else None
            if not isinstance(name, str) or not name.strip():
                return out
            meta = registry.get(name.strip())
            if meta is None:
                log.warning(
                    "skills: state.%s names skill %r, which is not among %s",
                    field,
                    name,
                    registry.names(),
                )
                return out
            body = registry.load_content(meta.name, hot_reload=cfg.hot_reload)
            if body.strip():
                out.append({"role": "system", "content": self._skill_text(meta.name, body)})
            return out
        if self._skill_catalog_prompt:
            out.append({"role": "system", "content": self._skill_catalog_prompt})
        for name in get_active_skills(state) if state is not None else ():
            if name not in registry or _content_present(state, name):
                continue
            body = registry.load_content(name, hot_reload=cfg.hot_reload)
            if body.strip():
                out.append({"role": "system", "content": self._skill_text(name, body)})
        return out

    def _skill_text(self, name: str, body: str) -> str:
        cfg, registry = self._skills_config, self._skills_registry
        assert cfg is not None and registry is not None
        meta = registry.get(name)
        assert meta is not None
        return format_skill_content(
            registry, meta, cfg, can_read_files=self._skills_can_read, body=body
        )


def _content_present(state: Any, name: str) -> bool:
    marker = skill_content_marker(name)
    return any(
        getattr(m, "role", None) in ("tool", "system") and m.text().lstrip().startswith(marker)
        for m in getattr(state, "context", None) or ()
    )


def _put_tool(node: ToolNode, tool: Callable[..., Any]) -> None:
    name = getattr(tool, "__name__", "")
    current = node.get_tool(name)
    if current is not None and current.func is tool:
        return
    if current is not None and getattr(current.func, SKILL_TOOL_ATTR, False) is True:
        node.remove_tool(name)  # the tool of an earlier reload
    node.add_tool(tool)  # GRAPH_001 when an application tool has the name
