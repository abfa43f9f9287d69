"""The Agent Skills format's rules for names, descriptions and fields, shared by the loader
(which reports them and loads the skill anyway) and ``validate_skill`` (which reports them as
errors)."""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "ALLOWED_FIELDS",
    "EXTENSION_FIELDS",
    "MAX_COMPATIBILITY",
    "MAX_DESCRIPTION",
    "MAX_NAME",
    "description_issues",
    "field_type_issues",
    "name_issues",
]

#: The front-matter fields the format defines.
ALLOWED_FIELDS = ("name", "description", "license", "compatibility", "allowed-tools", "metadata")
#: 10xGraph's extensions, which belong under ``metadata``.
EXTENSION_FIELDS = ("triggers", "tags", "priority", "resources")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500

_NAME_CHARS = re.compile(r"^[a-z0-9-]+$")


def name_issues(name: str, dir_name: str | None) -> list[str]:
    """Where ``name`` strays from the format (lower-case letters, digits and single hyphens,
    not at either end, at most 64 characters, equal to its folder's name)."""
    out: list[str] = []
    if len(name) > MAX_NAME:
        out.append(f"Skill name exceeds {MAX_NAME} characters ({len(name)})")
    if name != name.lower():
        out.append(f"Skill name {name!r} must be lowercase")
    if not _NAME_CHARS.match(name.lower()):
        out.append(
            f"Skill name {name!r} contains invalid characters; use lowercase letters, digits "
            "and hyphens"
        )
    if "--" in name:
        out.append(f"Skill name {name!r} must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        out.append(f"Skill name {name!r} must not start or end with a hyphen")
    if dir_name is not None and dir_name != name:
        out.append(f"Directory name {dir_name!r} must match skill name {name!r}")
    return out


def description_issues(description: str) -> list[str]:
    """Where ``description`` strays from the format (at most 1024 characters)."""
    if len(description) > MAX_DESCRIPTION:
        return [f"Description exceeds {MAX_DESCRIPTION} characters ({len(description)})"]
    return []


def field_type_issues(front: dict[str, Any]) -> list[str]:
    """Wrong types or sizes of the optional fields ``license``, ``compatibility``,
    ``allowed-tools`` and ``metadata``."""
    out: list[str] = []
    if "license" in front and not isinstance(front["license"], str):
        out.append("'license' must be a string")
    if "compatibility" in front:
        value = front["compatibility"]
        if not isinstance(value, str) or not value.strip():
            out.append("'compatibility' must be a non-empty string")
        elif len(value) > MAX_COMPATIBILITY:
            out.append(f"Compatibility exceeds {MAX_COMPATIBILITY} characters ({len(value)})")
    if "allowed-tools" in front and not isinstance(front["allowed-tools"], str):
        out.append("'allowed-tools' must be a space-separated string")
    if "metadata" in front and not isinstance(front["metadata"], dict):
        out.append("'metadata' must be a mapping of strings")
    return out
