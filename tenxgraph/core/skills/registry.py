"""``SkillsRegistry``: the skills an agent knows, by name, and what is shown to the model.

Skills are found with :func:`~tenxgraph.core.skills.loader.discover_skills`; the catalog
(:meth:`SkillsRegistry.build_catalog`) lists them for the model, and the tools of
:mod:`tenxgraph.core.skills.activation` hand out their instructions and bundled files.
The Markdown trigger table and the ``set_skill`` tool of 10xGraph's skills reference page are
kept as :meth:`SkillsRegistry.build_trigger_table` / :meth:`SkillsRegistry.build_set_skill_tool`
for applications that wire them by hand.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from .loader import discover_skills, list_skill_files, load_skill_content, read_skill_file
from .models import DEFAULT_MAX_RESOURCE_BYTES, SkillDiagnostic, SkillMeta

__all__ = ["SkillsRegistry"]

log = logging.getLogger("tenxgraph.skills")

PathLike = str | os.PathLike[str]


class SkillsRegistry:
    """The skills an agent knows, by name.

    Attributes:
        diagnostics (list[SkillDiagnostic]): what the last :meth:`discover` / :meth:`refresh`
            found wrong (skipped skills, departures from the format, shadowed names).
    """

    def __init__(self) -> None:
        self._skills: dict[str, SkillMeta] = {}
        # name -> (mtime of SKILL.md when read, body)
        self._bodies: dict[str, tuple[float, str]] = {}
        self.diagnostics: list[SkillDiagnostic] = []

    def __len__(self) -> int:
        return len(self._skills)

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    # -- finding skills ----------------------------------------------------------------------
    def discover(self, skills_dir: PathLike | Sequence[PathLike]) -> list[SkillMeta]:
        """Register the skills under one directory or a list of them (see
        :func:`~tenxgraph.core.skills.loader.discover_skills`).

        A name found twice keeps the first (earlier directory, then path order) and the other
        is reported as shadowed; a name already registered from another file is also kept.
        A skill found again at the same file is updated. Nothing raises for a bad skill: see
        :attr:`diagnostics` (each new one is also logged at WARNING).

        Args:
            skills_dir: the directories.

        Returns:
            The skills registered or updated by this call.
        """
        found, diags = discover_skills(skills_dir)
        added: list[SkillMeta] = []
        for meta in found:
            current = self._skills.get(meta.name)
            if current is not None and current.skill_file != meta.skill_file:
                diags.append(
                    SkillDiagnostic(
                        "warning",
                        f"Skill {meta.name!r} at {meta.skill_file} is shadowed by the one at "
                        f"{current.skill_file}",
                        meta.skill_file,
                    )
                )
                continue
            self.register(meta)
            added.append(meta)
        # logged once: a hot reload finding the same problems again stays quiet
        for d in diags:
            if d not in self.diagnostics:
                log.warning("skills: %s", d)
        self.diagnostics = diags
        return added

    def refresh(self, skills_dir: PathLike | Sequence[PathLike]) -> list[SkillMeta]:
        """Replace the registry's skills by those now under ``skills_dir`` (skills whose
        folders are gone are forgotten); used by hot reload.

        Returns:
            The skills now registered, as :meth:`discover` returns them.
        """
        fresh = SkillsRegistry()
        fresh.diagnostics = self.diagnostics
        found = fresh.discover(skills_dir)
        for name, meta in fresh._skills.items():
            cached = self._bodies.get(name)
            old = self._skills.get(name)
            if cached is not None and old is not None and old.skill_file == meta.skill_file:
                fresh._bodies[name] = cached
        self._skills, self._bodies, self.diagnostics = (
            fresh._skills,
            fresh._bodies,
            fresh.diagnostics,
        )
        return found

    def register(self, meta: SkillMeta, replace: bool = False) -> None:
        """Register one skill.

        Args:
            meta: the skill (its ``skill_file`` is read for the body).
            replace: replace a skill of the same name from another file.

        Raises:
            TypeError: ``meta`` is not a ``SkillMeta``.
            ValueError: a skill of that name from another file is registered and ``replace``
                is false (registering the same file again just updates it).
        """
        if not isinstance(meta, SkillMeta):
            raise TypeError(f"register() takes a SkillMeta, got {type(meta).__name__}")
        current = self._skills.get(meta.name)
        if current is not None and current.skill_file != meta.skill_file and not replace:
            raise ValueError(
                f"Duplicate skill name {meta.name!r}: {current.skill_file} and "
                f"{meta.skill_file}; pass replace=True to use the second"
            )
        if current is not None and current.skill_file != meta.skill_file:
            self._bodies.pop(meta.name, None)
        self._skills[meta.name] = meta

    def unregister(self, name: str) -> bool:
        """Forget ``name``; ``True`` when it was registered."""
        self._bodies.pop(name, None)
        return self._skills.pop(name, None) is not None

    # -- looking up --------------------------------------------------------------------------
    def get(self, name: str) -> SkillMeta | None:
        """The skill ``name``, or ``None``."""
        return self._skills.get(name)

    def get_all(self, tags: Iterable[str] | None = None) -> list[SkillMeta]:
        """Every skill (only those with any of ``tags`` when given; tags compare in lower
        case), by descending priority then name."""
        wanted = {t.lower() for t in tags} if tags else None
        skills = [m for m in self._skills.values() if wanted is None or m.tags & wanted]
        return sorted(skills, key=lambda m: (-m.priority, m.name))

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._skills)

    def load_content(self, name: str, hot_reload: bool = True) -> str:
        """The body of skill ``name``'s ``SKILL.md`` (``""`` for an unknown name).

        Args:
            name: the skill.
            hot_reload: read the file again when its modification time changed since it was
                last read (``False``: the first reading is kept).
        """
        meta = self._skills.get(name)
        if meta is None:
            return ""
        cached = self._bodies.get(name)
        if cached is not None and not hot_reload:
            return cached[1]
        try:
            mtime = Path(meta.skill_file).stat().st_mtime
        except OSError:
            return cached[1] if cached is not None else ""
        if cached is not None and cached[0] == mtime:
            return cached[1]
        body = load_skill_content(meta)
        self._bodies[name] = (mtime, body)
        return body

    def list_files(self, name: str, limit: int | None = None) -> tuple[list[str], bool]:
        """The files bundled with skill ``name`` (see
        :func:`~tenxgraph.core.skills.loader.list_skill_files`).

        Args:
            name: the skill.
            limit: return at most this many.

        Returns:
            ``(paths, truncated)``; ``([], False)`` for an unknown name.
        """
        meta = self._skills.get(name)
        if meta is None:
            return [], False
        files = list_skill_files(meta)
        if limit is not None and len(files) > limit:
            return files[:limit], True
        return files, False

    def read_file(self, name: str, path: str, max_bytes: int) -> str:
        """A bundled file of skill ``name`` (see
        :func:`~tenxgraph.core.skills.loader.read_skill_file`).

        Raises:
            KeyError: no skill ``name``.
            SkillResourceError: ``VALIDATION_000`` the path is refused or missing.
        """
        meta = self._skills.get(name)
        if meta is None:
            raise KeyError(name)
        return read_skill_file(meta, path, max_bytes)

    def load_resources(self, name: str) -> dict[str, str]:
        """The text of every file bundled with skill ``name``, by relative path (``{}`` for an
        unknown name); each cut at ``DEFAULT_MAX_RESOURCE_BYTES``."""
        meta = self._skills.get(name)
        if meta is None:
            return {}
        return {
            f: read_skill_file(meta, f, DEFAULT_MAX_RESOURCE_BYTES) for f in list_skill_files(meta)
        }

    # -- what the model sees -----------------------------------------------------------------
    def build_catalog(self, tags: Iterable[str] | None = None) -> str:
        """The skills as an ``<available_skills>`` XML block (name, description, and
        triggers when any; by descending priority then name; text XML-escaped); ``""``
        without skills."""
        skills = self.get_all(tags)
        if not skills:
            return ""
        parts = ["<available_skills>"]
        for m in skills:
            parts.append("<skill>")
            parts.append(f"<name>{escape(m.name)}</name>")
            parts.append(f"<description>{escape(m.description)}</description>")
            if m.triggers:
                parts.append(f"<triggers>{escape('; '.join(m.triggers))}</triggers>")
            parts.append("</skill>")
        parts.append("</available_skills>")
        return "\n".join(parts)

    def build_trigger_table(self, tags: Iterable[str] | None = None) -> str:
        """A Markdown table of the skills (name, description, triggers), by descending
        priority then name, with a line saying to load one with ``set_skill``; ``""`` without
        skills (the prompt of 10xGraph's reference page, for :meth:`build_set_skill_tool`)."""
        skills = self.get_all(tags)
        if not skills:
            return ""

        def cell(text: str) -> str:
            return text.replace("|", "\\|").replace("\n", " ")

        rows = [
            "Skills you can load with the set_skill tool (call it with the skill's name when a "
            "request matches its triggers):",
            "",
            "| Skill | Description | Triggers |",
            "| --- | --- | --- |",
        ]
        for m in skills:
            rows.append(
                f"| {cell(m.name)} | {cell(m.description)} | {cell(', '.join(m.triggers))} |"
            )
        return "\n".join(rows)

    def build_set_skill_tool(self, hot_reload: bool = True) -> Callable[..., str]:
        """The ``set_skill(skill_name, resource_name=None)`` tool of 10xGraph's reference
        page: returns a skill's body, or one of its bundled files.

        The tool raises ``ValueError`` (the model gets an error answer) for an unknown skill
        or file, naming the known ones; a file path leaving the skill is refused the same
        way.
        """
        registry = self

        def set_skill(skill_name: str, resource_name: str | None = None) -> str:
            """Load the instructions of a skill (or one of its bundled files) into the
            conversation.

            Args:
                skill_name: the skill's name, from the skills table.
                resource_name: a file of that skill, to read instead of its instructions.
            """
            meta = registry.get(skill_name)
            if meta is None:
                raise ValueError(
                    f"unknown skill {skill_name!r}; known skills: {', '.join(registry.names())}"
                )
            if resource_name is not None:
                files = list_skill_files(meta)
                if resource_name not in files:
                    raise ValueError(
                        f"skill {skill_name!r} has no file {resource_name!r}; its files: "
                        f"{', '.join(files) or '(none)'}"
                    )
                return read_skill_file(meta, resource_name, DEFAULT_MAX_RESOURCE_BYTES)
            return registry.load_content(skill_name, hot_reload=hot_reload)

        return set_skill
