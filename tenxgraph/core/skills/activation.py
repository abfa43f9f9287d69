"""Skill activation: the ``activate_skill`` and ``read_skill_resource`` tools, the catalog
prompt, and the record of which skills a run activated (10xGraph 0.10.3's
``tenxgraph.core.skills.activation``).

An activated skill's text is returned as a tool result wrapped in
``<skill_content name="...">...</skill_content>``, so it stays in the conversation (and in the
tool ledger: a replayed call returns the recorded text without running the tool again). The
activation is also recorded under ``state.execution_meta.internal_data["active_skills"]``
while the run lasts; :func:`get_active_skills` reports those and every skill whose content is in
``state.context``. An ``Agent`` sends an active skill's text again as a system message when
it is no longer in the conversation (see ``AgentSkillsMixin``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any, Literal
from xml.sax.saxutils import quoteattr

from tenxgraph.core.state import AgentState, ToolResult

from .loader import SkillResourceError
from .models import SkillConfig, SkillMeta
from .registry import SkillsRegistry

__all__ = [
    "ACTIVE_SKILLS_KEY",
    "MAX_LISTED_FILES",
    "SKILL_TOOL_ATTR",
    "build_catalog_prompt",
    "format_skill_content",
    "get_active_skills",
    "make_activate_skill_tool",
    "make_read_skill_resource_tool",
    "mark_skill_active",
    "skill_content_marker",
]

#: Key of ``execution_meta.internal_data`` holding the names of the skills activated.
ACTIVE_SKILLS_KEY = "active_skills"
#: At most this many bundled files are listed in an activated skill's text.
MAX_LISTED_FILES = 50
#: Attribute set (``True``) on the skill tools: the ``ToolNode`` runs their callbacks as
#: ``InvocationType.SKILL`` instead of ``TOOL``.
SKILL_TOOL_ATTR = "__tenxgraph_skill_tool__"

_MARKER = re.compile(r'^\s*<skill_content name="([^"]*)">')
# sync tools run in worker threads: parallel activations must not lose each other's record
_RECORD_LOCK = threading.Lock()


def skill_content_marker(name: str) -> str:
    """The opening tag of skill ``name``'s activated text: ``<skill_content name="...">``."""
    return f"<skill_content name={quoteattr(name)}>"


def _internal(state: Any) -> dict[str, Any] | None:
    meta = getattr(state, "execution_meta", None)
    data = getattr(meta, "internal_data", None)
    return data if isinstance(data, dict) else None


def _context_skills(state: Any) -> list[str]:
    names = []
    for m in getattr(state, "context", None) or ():
        if getattr(m, "role", None) in ("tool", "system"):
            match = _MARKER.match(m.text())
            if match:
                names.append(match.group(1))
    return names


def _in_context(state: Any, name: str) -> bool:
    return name in _context_skills(state)


def get_active_skills(state: Any) -> list[str]:
    """The skills activated in ``state``: those recorded by :func:`mark_skill_active`, then
    those whose activated text is in ``state.context``; each once, in that order (``[]`` for
    a state without them)."""
    data = _internal(state)
    recorded = list(data.get(ACTIVE_SKILLS_KEY, ())) if data is not None else []
    return list(dict.fromkeys([*recorded, *_context_skills(state)]))


def mark_skill_active(state: Any, name: str) -> None:
    """Record that skill ``name`` was activated in ``state``
    (``execution_meta.internal_data["active_skills"]``); nothing for a state without
    ``execution_meta``."""
    data = _internal(state)
    if data is None:
        return
    with _RECORD_LOCK:
        active = list(data.get(ACTIVE_SKILLS_KEY, ()))
        if name not in active:
            active.append(name)
        data[ACTIVE_SKILLS_KEY] = active


def format_skill_content(
    registry: SkillsRegistry,
    meta: SkillMeta,
    config: SkillConfig,
    *,
    can_read_files: bool,
    body: str | None = None,
) -> str:
    """Skill ``meta``'s text as the model gets it: the body, its ``compatibility``, its
    folder (with ``include_skill_path``) and its bundled files, inside
    ``<skill_content name="...">``; with ``can_read_files``, a line saying how to read a file
    with ``read_skill_resource``."""
    if body is None:
        body = registry.load_content(meta.name, hot_reload=config.hot_reload)
    parts = [skill_content_marker(meta.name), body.strip()]
    notes = []
    if meta.compatibility:
        notes.append(f"Compatibility: {meta.compatibility}")
    if config.include_skill_path:
        notes.append(f"Skill directory: {meta.skill_dir}")
    if notes:
        parts.append("\n".join(notes))
    files, truncated = registry.list_files(meta.name, limit=MAX_LISTED_FILES)
    if files:
        listing = ["<skill_resources>", *(f"<file>{f}</file>" for f in files)]
        if truncated:
            listing.append(f"<!-- only the first {MAX_LISTED_FILES} files are listed -->")
        listing.append("</skill_resources>")
        if can_read_files:
            listing.append(
                f'Read a bundled file with read_skill_resource(skill_name="{meta.name}", '
                'path="<file>").'
            )
        parts.append("\n".join(listing))
    return "\n\n".join(p for p in parts if p) + "\n</skill_content>"


def _error(message: str) -> ToolResult:
    return ToolResult(message=message, is_error=True)


def _names_hint(registry: SkillsRegistry) -> str:
    return f"Available skills: {', '.join(registry.names()) or '(none)'}"


def _name_type(registry: SkillsRegistry) -> Any:
    names = registry.names()
    return Literal[tuple(names)] if names else str


def make_activate_skill_tool(
    registry: SkillsRegistry,
    config: SkillConfig,
    *,
    embed_catalog: bool,
    can_read_files: bool,
) -> Callable[..., str | ToolResult]:
    """The ``activate_skill(skill_name)`` tool.

    Its ``skill_name`` parameter is an enum of the registry's names at the time it is made;
    the graph state is injected (hidden from the model). It returns the skill's text
    (:func:`format_skill_content`) and records the activation; a skill already active whose
    text is still in the conversation gets a short "already active" answer instead. An unknown
    name or an empty body answers with an error ``ToolResult`` naming the available skills.

    Args:
        registry: the skills.
        config: ``hot_reload`` and ``include_skill_path`` apply.
        embed_catalog: list the skills (``- name: description``) in the tool's description
            (used when the catalog is not sent as a system message).
        can_read_files: mention ``read_skill_resource`` in the text of skills with files.

    Returns:
        The tool function (its ``__name__`` is ``activate_skill``).
    """

    def activate_skill(skill_name: str, state: AgentState | None = None) -> str | ToolResult:
        meta = registry.get(skill_name)
        if meta is None:
            return _error(f"Unknown skill {skill_name!r}. {_names_hint(registry)}")
        if state is not None and skill_name in get_active_skills(state):
            if _in_context(state, skill_name):
                return (
                    f"Skill {skill_name!r} is already active; its instructions are earlier in "
                    "this conversation."
                )
        body = registry.load_content(skill_name, hot_reload=config.hot_reload)
        if not body.strip():
            return _error(f"Skill {skill_name!r} has no instructions (its SKILL.md body is empty)")
        text = format_skill_content(
            registry, meta, config, can_read_files=can_read_files, body=body
        )
        if state is not None:
            mark_skill_active(state, skill_name)
        return text

    doc = (
        "Activate a skill: load its full instructions into the conversation. Call it when "
        "the user's request matches a skill's description, before answering."
    )
    if embed_catalog:
        lines = [f"- {m.name}: {m.description}" for m in registry.get_all()]
        if lines:
            doc += "\n\n" + "\n".join(lines)
    activate_skill.__doc__ = doc
    activate_skill.__annotations__["skill_name"] = _name_type(registry)
    setattr(activate_skill, SKILL_TOOL_ATTR, True)
    return activate_skill


def make_read_skill_resource_tool(
    registry: SkillsRegistry, config: SkillConfig
) -> Callable[..., str | ToolResult]:
    """The ``read_skill_resource(skill_name, path)`` tool: a file bundled with a skill,
    wrapped in ``<skill_resource skill="..." path="...">``, at most
    ``config.max_resource_bytes`` bytes of it.

    A path that is empty, absolute, leaves the skill's folder (links followed) or names no
    file answers with an error ``ToolResult`` listing the skill's files; so does an unknown
    skill (naming the available ones).

    Returns:
        The tool function (its ``__name__`` is ``read_skill_resource``).
    """

    def read_skill_resource(skill_name: str, path: str) -> str | ToolResult:
        if registry.get(skill_name) is None:
            return _error(f"Unknown skill {skill_name!r}. {_names_hint(registry)}")
        try:
            text = registry.read_file(skill_name, path, config.max_resource_bytes)
        except SkillResourceError as exc:
            files, _ = registry.list_files(skill_name, limit=MAX_LISTED_FILES)
            return _error(f"{exc.message}. Bundled files: {', '.join(files) or '(none)'}")
        return (
            f"<skill_resource skill={quoteattr(skill_name)} path={quoteattr(path)}>\n"
            f"{text}\n</skill_resource>"
        )

    read_skill_resource.__doc__ = (
        "Read a file bundled with a skill (a reference, script or asset listed in the "
        "skill's <skill_resources>)."
    )
    read_skill_resource.__annotations__["skill_name"] = _name_type(registry)
    setattr(read_skill_resource, SKILL_TOOL_ATTR, True)
    return read_skill_resource


def build_catalog_prompt(registry: SkillsRegistry, *, can_read_files: bool) -> str:
    """The system message listing the skills for on-demand activation (``""`` without
    skills): how to use ``activate_skill`` (and ``read_skill_resource`` with
    ``can_read_files``), then :meth:`SkillsRegistry.build_catalog`."""
    catalog = registry.build_catalog()
    if not catalog:
        return ""
    text = (
        "You have skills: instructions for particular tasks. When a request matches a "
        "skill's description or triggers, call the `activate_skill` tool with its name "
        "before answering, and follow the instructions it returns."
    )
    if can_read_files:
        text += (
            " A skill's bundled files (listed when it is activated) can be read with the "
            "`read_skill_resource` tool."
        )
    return f"{text}\n\n{catalog}"
