"""``validate_skill``: check a skill folder against the Agent Skills format.

Unlike loading (lenient: see :mod:`tenxgraph.core.skills.loader`), validation reports every
departure from the format as an ``"error"``; advice about the body (its length, files it
mentions that do not exist) comes as ``"warning"`` s.
"""

from __future__ import annotations

import re
from pathlib import Path

from ._spec import ALLOWED_FIELDS, description_issues, field_type_issues, name_issues
from .loader import SKILL_FILE, PathLike, parse_skill_file
from .models import SkillDiagnostic

__all__ = ["MAX_BODY_LINES", "validate_skill"]

#: A body longer than this many lines gets a warning (move details into bundled files).
MAX_BODY_LINES = 500
_FILE_REFERENCE = re.compile(r"(?<![\w/.-])((?:references|scripts|assets)/[\w./-]*[\w-])")


def validate_skill(skill_dir: PathLike) -> list[SkillDiagnostic]:
    """Check the skill in folder ``skill_dir``.

    Args:
        skill_dir: the skill's folder.

    Returns:
        The findings, ``[]`` for a conforming skill. Errors: not a folder, no ``SKILL.md``,
        unreadable or invalid front matter, fields the format does not define, a missing or
        malformed ``name`` (lower-case letters, digits and single hyphens, at most 64
        characters, equal to the folder name) or ``description`` (at most 1024 characters),
        wrongly typed ``license`` / ``compatibility`` (at most 500 characters) /
        ``allowed-tools`` / ``metadata``. Warnings: a body over 500 lines, and paths under
        ``references/``, ``scripts/`` or ``assets/`` that the body mentions but the folder
        lacks.
    """
    folder = Path(skill_dir)
    if not folder.is_dir():
        return [SkillDiagnostic("error", "Not a directory", str(folder))]
    file = folder / SKILL_FILE
    if not file.is_file():
        return [SkillDiagnostic("error", f"Missing required file: {SKILL_FILE}", str(folder))]
    parsed = parse_skill_file(file)
    out = list(parsed.diagnostics)

    def add(level: str, message: str) -> None:
        out.append(SkillDiagnostic(level, message, str(file)))  # type: ignore[arg-type]

    front = parsed.frontmatter
    if front is not None:
        unknown = sorted(k for k in front if k not in ALLOWED_FIELDS)
        if unknown:
            add("error", f"Unexpected frontmatter fields: {', '.join(unknown)}")
        name, description = front.get("name"), front.get("description")
        if not isinstance(name, str) or not name.strip():
            add("error", "Missing required field: name")
        else:
            for msg in name_issues(name, folder.resolve().name):
                add("error", msg)
        if not isinstance(description, str) or not description.strip():
            add("error", "Missing required field: description")
        else:
            for msg in description_issues(description.strip()):
                add("error", msg)
        for msg in field_type_issues(front):
            add("error", msg)
        meta = front.get("metadata")
        if isinstance(meta, dict):
            bad = [str(k) for k, v in meta.items() if not isinstance(v, str)]
            if bad:
                add("error", f"Metadata values must be strings: {', '.join(bad)}")
    lines = parsed.body.count("\n") + 1 if parsed.body else 0
    if lines > MAX_BODY_LINES:
        add(
            "warning",
            f"SKILL.md body has {lines} lines; keep it under {MAX_BODY_LINES} and move details "
            "into bundled reference files",
        )
    for ref in dict.fromkeys(_FILE_REFERENCE.findall(parsed.body)):
        if not (folder / ref).exists():
            add("warning", f"Referenced file not found: {ref}")
    return out
