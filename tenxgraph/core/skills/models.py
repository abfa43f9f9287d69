"""``SkillConfig``, ``SkillMeta`` and ``SkillDiagnostic`` (10xGraph 0.10.3's skills models).

Skills follow the Agent Skills format (a folder holding a ``SKILL.md`` whose YAML front matter
has ``name``, ``description`` and the optional ``license``, ``compatibility``,
``allowed-tools`` and ``metadata``); 10xGraph's own extensions (``triggers``, ``tags``,
``priority``) are read from ``metadata``. See ``docs/how-to/skills.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["DEFAULT_MAX_RESOURCE_BYTES", "SkillConfig", "SkillDiagnostic", "SkillMeta"]

#: Default of ``SkillConfig.max_resource_bytes``: how much of one bundled file a tool returns.
DEFAULT_MAX_RESOURCE_BYTES = 200_000


@dataclass(frozen=True)
class SkillDiagnostic:
    """One finding about a skill: why it was skipped, or where it strays from the format.

    Attributes:
        level: ``"error"`` (the skill breaks the format; when loading, ``"Skipped..."``
            errors mean the skill is not available) or ``"warning"``.
        message: what is wrong and how to fix it.
        path: the file or directory concerned (usually the ``SKILL.md``).
    """

    level: Literal["error", "warning"]
    message: str
    path: str = ""

    def __str__(self) -> str:
        return f"{self.level}: {self.message}" + (f" ({self.path})" if self.path else "")


class SkillConfig(BaseModel):
    """How an ``Agent`` uses skills (``Agent(skills=SkillConfig(...))``).

    Attributes:
        skills_dir: a directory (``str`` or ``Path``) or a list of them, searched for skill
            folders; a folder holding a ``SKILL.md`` is itself one skill. When several hold a
            skill of the same name the earlier directory wins. Relative paths are resolved from
            the working directory; ``None`` disables skills.
        inject_catalog: ``on-demand`` mode: add a system message listing the skills
            (``<available_skills>``) to every model request; ``False`` puts the list into the
            ``activate_skill`` tool's description instead. ``inject_trigger_table`` (the
            name 10xGraph's reference page uses) is accepted for it.
        hot_reload: re-read the directories and changed ``SKILL.md`` files on every model call
            (``False``: read once, when the agent is built).
        include_skill_path: add the skill's directory path to an activated skill's text.
        max_resource_bytes: at most this many bytes of one bundled file are returned by
            ``read_skill_resource`` (the rest is cut with a note); > 0.
        mode: ``"on-demand"``: the model activates a skill with the ``activate_skill`` tool
            the agent adds to its tool node; ``"session"``: the skill named by the state field
            ``preload_from`` is sent as a system message on every call, with no catalog and no
            ``activate_skill`` tool.
        preload_from: the state field naming the session's skill (``mode="session"``); an
            identifier, surrounding spaces dropped.

    Raises:
        pydantic.ValidationError: an empty ``skills_dir`` (or list, or list entry), a
            ``skills_dir`` that is neither a path nor a list of paths, ``max_resource_bytes``
            <= 0, an empty ``preload_from`` or one that is not an identifier, or
            ``mode="session"`` with a ``skills_dir`` and no ``preload_from``.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    skills_dir: str | list[str] | None = None
    inject_catalog: bool = Field(
        default=True, validation_alias=AliasChoices("inject_catalog", "inject_trigger_table")
    )
    hot_reload: bool = True
    include_skill_path: bool = False
    max_resource_bytes: int = Field(default=DEFAULT_MAX_RESOURCE_BYTES, gt=0)
    mode: Literal["on-demand", "session"] = "on-demand"
    preload_from: str | None = None

    @field_validator("skills_dir", mode="before")
    @classmethod
    def _dirs(cls, value: Any) -> str | list[str] | None:
        def one(item: Any) -> str:
            if isinstance(item, Path):
                return str(item)
            if not isinstance(item, str):
                raise ValueError(
                    f"skills_dir takes a path or a list of paths, got {type(item).__name__}"
                )
            if not item.strip():
                raise ValueError("skills_dir must not be an empty string (pass None to disable)")
            return item.strip()

        if value is None:
            return None
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError("skills_dir must not be an empty list (pass None to disable)")
            return [one(v) for v in value]
        return one(value)

    @field_validator("preload_from")
    @classmethod
    def _state_field_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if not value:
            raise ValueError("preload_from must not be an empty string (pass None to unset it)")
        if not value.isidentifier():
            raise ValueError(
                f"preload_from {value!r} is not a valid Python identifier; it must be a state "
                "field name"
            )
        return value

    @model_validator(mode="after")
    def _session_needs_field(self) -> SkillConfig:
        if self.mode == "session" and self.skills_dir is not None and self.preload_from is None:
            raise ValueError(
                "preload_from must be set when mode='session' (the state field naming the skill)"
            )
        return self

    @property
    def skill_dirs(self) -> list[str]:
        """``skills_dir`` as a list (``[]`` when skills are disabled)."""
        if self.skills_dir is None:
            return []
        return [self.skills_dir] if isinstance(self.skills_dir, str) else list(self.skills_dir)

    @property
    def inject_trigger_table(self) -> bool:
        """``inject_catalog`` under the name of 10xGraph's reference page."""
        return self.inject_catalog


def _clean_list(value: Any) -> list[str]:
    return [str(v).strip() for v in (value or ()) if str(v).strip()]


class SkillMeta(BaseModel):
    """One skill, from the front matter of its ``SKILL.md`` (built by the loader).

    A name or description that strays from the Agent Skills format (upper case, ``_``, over
    64 / 1024 characters, a folder of another name) still loads, with a diagnostic; only names
    that cannot be used at all are refused.

    Attributes:
        name: the skill's name, as written (no whitespace, ``/`` or ``\\``).
        description: what the skill does and when to use it (surrounding spaces dropped;
            not empty).
        license: the ``license`` field, if any.
        compatibility: the ``compatibility`` field (environment requirements), if any.
        allowed_tools: ``allowed-tools``, split on spaces.
        metadata: the ``metadata`` mapping (values as strings).
        triggers: phrases suggesting the skill (``metadata.triggers``, ``;``-separated).
        tags: lower-case labels (``metadata.tags``, ``,``-separated).
        priority: order in the catalog, higher first (``metadata.priority``).
        skill_dir: the skill's directory (absolute, set by the loader).
        skill_file: its ``SKILL.md`` (absolute, set by the loader).

    Raises:
        pydantic.ValidationError: an empty or unusable name, an empty description.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    license: str | None = None
    compatibility: str | None = None
    allowed_tools: list[str] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)
    triggers: list[str] = Field(default_factory=list)
    tags: set[str] = Field(default_factory=set)
    priority: int = 0
    skill_dir: str = ""
    skill_file: str = ""

    @field_validator("name")
    @classmethod
    def _usable_name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a skill name must not be empty")
        if any(c.isspace() for c in value) or "/" in value or "\\" in value:
            raise ValueError(f"skill name {value!r} must not contain whitespace, '/' or '\\'")
        return value

    @field_validator("description")
    @classmethod
    def _description(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("a skill description must not be empty")
        return value

    @field_validator("triggers", mode="before")
    @classmethod
    def _triggers(cls, value: Any) -> list[str]:
        return _clean_list(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> set[str]:
        return {t.lower() for t in _clean_list(value)}
