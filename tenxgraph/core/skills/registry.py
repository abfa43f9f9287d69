"""``SkillsRegistry``: finds ``SKILL.md`` files and builds what an ``Agent`` sends.

A ``SKILL.md`` starts with YAML front matter between two ``---`` lines (the fields of
:class:`~tenxgraph.core.skills.models.SkillMeta`; ``skill_dir`` / ``skill_file`` are set here)
followed by the skill's instructions in Markdown, the *content* handed to the model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from tenxgraph.core.exceptions import ValidationError

from .models import SkillMeta

__all__ = ["SkillsRegistry", "parse_skill_file", "resource_path"]

log = logging.getLogger("tenxgraph.skills")


def _split(text: str, path: Path) -> tuple[dict[str, Any], str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ValidationError(
            f"{path}: a SKILL.md starts with YAML front matter between '---' lines",
            context={"file": str(path)},
        )
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            front = yaml.safe_load("".join(lines[1:i])) or {}
            if not isinstance(front, dict):
                raise ValidationError(
                    f"{path}: the front matter must be a YAML mapping", context={"file": str(path)}
                )
            return front, "".join(lines[i + 1 :]).lstrip("\n")
    raise ValidationError(
        f"{path}: the front matter has no closing '---' line", context={"file": str(path)}
    )


def parse_skill_file(path: str | Path) -> tuple[SkillMeta, str]:
    """Read one ``SKILL.md``.

    Args:
        path: the file.

    Returns:
        ``(meta, content)``: the validated front matter and the Markdown after it.

    Raises:
        ValidationError: ``VALIDATION_000`` for a file without valid front matter or with
            fields that fail :class:`SkillMeta`.
        OSError: the file cannot be read.
    """
    p = Path(path)
    front, body = _split(p.read_text(encoding="utf-8"), p)
    try:
        meta = SkillMeta(**{**front, "skill_dir": str(p.parent), "skill_file": str(p)})
    except Exception as exc:  # pydantic's ValidationError, or TypeError for odd keys
        raise ValidationError(
            f"{p}: invalid skill front matter: {exc}", context={"file": str(p)}
        ) from None
    return meta, body


def resource_path(meta: SkillMeta, resource: str) -> Path:
    """The real path of resource ``resource`` of skill ``meta``, symbolic links followed.

    ``SkillMeta`` already refuses absolute paths and ``..``; this also refuses a resource whose
    real path (``Path.resolve``) is outside the real skill directory, such as a symbolic link
    pointing elsewhere.

    Args:
        meta: the skill.
        resource: one of ``meta.resources``.

    Returns:
        The resolved path (it may not exist; reading it then raises ``OSError``).

    Raises:
        ValidationError: ``VALIDATION_000`` the path leaves the skill's directory.
    """
    root = Path(meta.skill_dir).resolve()
    path = (root / resource).resolve()
    if not path.is_relative_to(root):
        raise ValidationError(
            f"skill {meta.name!r}: resource {resource!r} resolves to {str(path)!r}, outside the "
            f"skill's directory {str(root)!r}; refused",
            context={"skill": meta.name, "resource": resource},
        )
    return path


class SkillsRegistry:
    """The skills an agent knows, by name."""

    def __init__(self) -> None:
        self._skills: dict[str, SkillMeta] = {}
        self._content: dict[str, tuple[float, str]] = {}

    def __len__(self) -> int:
        return len(self._skills)

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    def discover(self, skills_dir: str | Path) -> list[SkillMeta]:
        """Register every ``SKILL.md`` under ``skills_dir`` (recursively, sorted by path).

        A file that cannot be parsed is skipped with a warning naming it. Skills found again
        replace their earlier entry.

        Args:
            skills_dir: the directory.

        Returns:
            The skills found, in path order.

        Raises:
            ValidationError: ``VALIDATION_000`` when ``skills_dir`` is not a directory or two
                files declare the same name; the registry is then left as it was.
        """
        root = Path(skills_dir)
        if not root.is_dir():
            raise ValidationError(
                f"skills_dir {str(root)!r} is not a directory", context={"skills_dir": str(root)}
            )
        found: list[SkillMeta] = []
        seen: dict[str, str] = {}
        # built aside and swapped in when complete: an error leaves the registry unchanged
        skills = dict(self._skills)
        content = dict(self._content)
        for path in sorted(root.rglob("SKILL.md")):
            try:
                meta, body = parse_skill_file(path)
            except (ValidationError, OSError, yaml.YAMLError) as exc:
                log.warning("skipping skill file %s: %s", path, exc)
                continue
            if meta.name in seen:
                raise ValidationError(
                    f"skill name {meta.name!r} is declared by {seen[meta.name]} and {path}",
                    context={"skill": meta.name},
                )
            seen[meta.name] = str(path)
            skills[meta.name] = meta
            content[meta.name] = (path.stat().st_mtime, body)
            found.append(meta)
        self._skills, self._content = skills, content
        return found

    def register(self, meta: SkillMeta) -> None:
        """Register one skill by hand (its ``skill_file`` is read for the content)."""
        if not isinstance(meta, SkillMeta):
            raise TypeError(f"register() takes a SkillMeta, got {type(meta).__name__}")
        self._skills[meta.name] = meta
        self._content.pop(meta.name, None)

    def get(self, name: str) -> SkillMeta | None:
        """The skill ``name``, or ``None``."""
        return self._skills.get(name)

    def get_all(self, tags: Iterable[str] | None = None) -> list[SkillMeta]:
        """Every skill (with any of ``tags`` when given), by descending priority then name."""
        wanted = set(tags) if tags else None
        skills = [m for m in self._skills.values() if wanted is None or m.tags & wanted]
        return sorted(skills, key=lambda m: (-m.priority, m.name))

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._skills)

    def unregister(self, name: str) -> bool:
        """Forget ``name``; ``True`` when it was registered."""
        self._content.pop(name, None)
        return self._skills.pop(name, None) is not None

    def load_content(self, name: str, hot_reload: bool = True) -> str:
        """The Markdown of skill ``name`` (``""`` for an unknown name).

        Args:
            name: the skill.
            hot_reload: re-read the file when it changed since it was last read.

        Raises:
            ValidationError: the file no longer has valid front matter.
            OSError: the file cannot be read.
        """
        meta = self._skills.get(name)
        if meta is None:
            return ""
        cached = self._content.get(name)
        path = Path(meta.skill_file)
        if cached is not None and (not hot_reload or path.stat().st_mtime == cached[0]):
            return cached[1]
        _, body = parse_skill_file(path)
        self._content[name] = (path.stat().st_mtime, body)
        return body

    def load_resources(self, name: str) -> dict[str, str]:
        """The text of each resource file of skill ``name``, by its declared path
        (``{}`` for an unknown name).

        Raises:
            OSError: a declared resource cannot be read.
            ValidationError: ``VALIDATION_000`` a resource resolves outside the skill's
                directory (a symbolic link pointing out of it).
        """
        meta = self._skills.get(name)
        if meta is None:
            return {}
        return {r: resource_path(meta, r).read_text(encoding="utf-8") for r in meta.resources}

    def build_trigger_table(self, tags: Iterable[str] | None = None) -> str:
        """A Markdown table of the skills (name, description, triggers), by descending
        priority then name, with a line saying how to load one; ``""`` without skills."""
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
        """The ``set_skill(skill_name, resource_name=None)`` tool the model calls to load a
        skill (or one of its resource files).

        The tool raises ``ValueError`` (which answers the model with an error) for an unknown
        skill or resource, naming the known ones.
        """
        registry = self

        def set_skill(skill_name: str, resource_name: str | None = None) -> str:
            """Load the instructions of a skill (or one of its resource files) into the
            conversation.

            Args:
                skill_name: the skill's name, from the skills table.
                resource_name: a resource file of that skill, to read instead of the skill.
            """
            meta = registry.get(skill_name)
            if meta is None:
                raise ValueError(
                    f"unknown skill {skill_name!r}; known skills: {', '.join(registry.names())}"
                )
            if resource_name is not None:
                if resource_name not in meta.resources:
                    raise ValueError(
                        f"skill {skill_name!r} has no resource {resource_name!r}; its "
                        f"resources: {', '.join(meta.resources) or '(none)'}"
                    )
                return resource_path(meta, resource_name).read_text(encoding="utf-8")
            return registry.load_content(skill_name, hot_reload=hot_reload)

        return set_skill
