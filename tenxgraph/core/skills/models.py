"""``SkillConfig`` and ``SkillMeta`` (10xGraph's skills reference)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath, PureWindowsPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["SkillConfig", "SkillMeta"]

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


class SkillConfig(BaseModel):
    """How an ``Agent`` uses skills (``Agent(skills=SkillConfig(...))``).

    Attributes:
        skills_dir: directory searched (recursively) for ``SKILL.md`` files; relative paths
            are resolved from the working directory; ``None`` disables skills.
        inject_trigger_table: ``on-demand`` mode: add a system message listing the skills and
            their triggers to every model request.
        hot_reload: re-read the directory and the skill files on every model call (``False``:
            read once, when the agent is built).
        mode: ``"on-demand"``: the model loads a skill by calling the ``set_skill`` tool, which
            the agent adds to its tool node; ``"session"``: the skill named by the state field
            ``preload_from`` is sent as a system message on every call, without table or tool.
        preload_from: the state field naming the session's skill (``mode="session"`` only); an
            identifier, surrounding spaces dropped.

    Raises:
        pydantic.ValidationError: an empty ``skills_dir`` or ``preload_from``, a
            ``preload_from`` that is not an identifier, or ``mode="session"`` with a
            ``skills_dir`` and no ``preload_from``.
    """

    model_config = ConfigDict(extra="forbid")

    skills_dir: str | None = None
    inject_trigger_table: bool = True
    hot_reload: bool = True
    mode: Literal["on-demand", "session"] = "on-demand"
    preload_from: str | None = None

    @field_validator("skills_dir")
    @classmethod
    def _not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be an empty string (pass None to leave it unset)")
        return value

    @field_validator("preload_from")
    @classmethod
    def _state_field_name(cls, value: str | None) -> str | None:
        # A state field name: surrounding spaces are dropped, the rest must be an identifier.
        if value is None:
            return None
        value = value.strip()
        if not value:
            raise ValueError("preload_from must not be an empty string (pass None to unset it)")
        if not value.isidentifier():
            raise ValueError(f"preload_from must be a state field name, got {value!r}")
        return value

    @model_validator(mode="after")
    def _session_needs_field(self) -> SkillConfig:
        if self.mode == "session" and self.skills_dir is not None and self.preload_from is None:
            raise ValueError(
                "preload_from must be set when mode='session' (the state field naming the skill)"
            )
        return self


class SkillMeta(BaseModel):
    """One skill, from the YAML front matter of its ``SKILL.md``.

    Attributes:
        name: slug (lowercase letters, digits, ``-``, ``_``; at most 128 characters).
        description: what the skill is for (1 to 2000 characters).
        triggers: phrases that suggest the skill (at most 50, each at most 500 characters).
        resources: files of the skill's directory it may hand out (relative paths, no ``..``;
            at most 100).
        tags: labels (at most 50).
        priority: 0 to 1000; higher comes first in the trigger table.
        skill_dir: the directory of the ``SKILL.md`` (set by the loader).
        skill_file: the ``SKILL.md`` path (set by the loader).
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=128)
    description: str = Field(min_length=1, max_length=2000)
    triggers: list[str] = Field(default_factory=list, max_length=50)
    resources: list[str] = Field(default_factory=list, max_length=100)
    tags: set[str] = Field(default_factory=set, max_length=50)
    priority: int = Field(default=0, ge=0, le=1000)
    skill_dir: str = ""
    skill_file: str = ""

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError("a skill name is lowercase letters, digits, '-' and '_'")
        return value

    @field_validator("triggers")
    @classmethod
    def _short_triggers(cls, value: list[str]) -> list[str]:
        for t in value:
            if len(t) > 500:
                raise ValueError("a trigger is at most 500 characters")
        return value

    @field_validator("resources")
    @classmethod
    def _relative(cls, value: list[str]) -> list[str]:
        for r in value:
            posix, win = PurePosixPath(r), PureWindowsPath(r)
            if posix.is_absolute() or win.is_absolute() or ".." in posix.parts or ".." in win.parts:
                raise ValueError(f"resource {r!r} must be a relative path inside the skill")
        return value
