"""Finding, parsing and reading skills (10xGraph 0.10.3's ``tenxgraph.core.skills.loader``).

A skill is a folder holding a ``SKILL.md``: YAML front matter between two ``---`` lines, then
the instructions in Markdown (the *body*). Loading is lenient: a skill that strays from the
Agent Skills format still loads, with :class:`~tenxgraph.core.skills.models.SkillDiagnostic`
s saying where; only a skill without a usable name or description is skipped (a diagnostic
starting ``"Skipped"``). Nothing here raises for a bad skill, except reading a bundled file
(:func:`read_skill_file`), which raises :class:`SkillResourceError`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic
import yaml

from tenxgraph.core.exceptions import ValidationError

from ._spec import (
    ALLOWED_FIELDS,
    EXTENSION_FIELDS,
    description_issues,
    field_type_issues,
    name_issues,
)
from .models import SkillDiagnostic, SkillMeta

__all__ = [
    "SKILL_FILE",
    "ParsedSkillFile",
    "SkillResourceError",
    "discover_skills",
    "iter_skill_dirs",
    "list_skill_files",
    "load_skill",
    "load_skill_content",
    "parse_skill_file",
    "read_skill_file",
    "split_frontmatter",
]

SKILL_FILE = "SKILL.md"
#: Folders never searched for skills (besides hidden ones).
IGNORED_DIRS = frozenset({"node_modules", "__pycache__"})
_MAX_DEPTH = 4
_BINARY_PROBE = 8192
_TOP_LEVEL_VALUE = re.compile(r"^([A-Za-z0-9_-]+):[ \t]+(.*?)\s*$")

PathLike = str | os.PathLike[str]


class SkillResourceError(ValidationError):
    """A bundled file of a skill cannot be read: an empty, absolute or escaping path, or a
    missing file (``VALIDATION_000``; ``context``: ``skill``, ``path``)."""


@dataclass
class ParsedSkillFile:
    """A ``SKILL.md`` split into its parts.

    Attributes:
        path: the file.
        frontmatter: the front matter as a mapping, or ``None`` when there is none usable.
        body: the Markdown after the front matter (surrounding blank space dropped).
        diagnostics: what went wrong while reading it.
    """

    path: Path
    frontmatter: dict[str, Any] | None
    body: str
    diagnostics: list[SkillDiagnostic] = field(default_factory=list)


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """Split a ``SKILL.md``'s text into ``(front matter, body)``.

    A byte-order mark, ``\\r\\n`` line ends and spaces after a ``---`` are tolerated; the
    closing ``---`` must be a line of its own (``----`` is not one).

    Args:
        text: the file's text.

    Returns:
        The raw YAML text (``None`` when the text has no complete front matter) and the body,
        stripped.
    """
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return None, text.strip()
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            raw = "".join(line + "\n" for line in lines[1:i])
            return raw, "\n".join(lines[i + 1 :]).strip()
    return None, text.strip()


def _quote_colon_values(raw: str) -> str | None:
    """``raw`` with each top-level plain value holding ``": "`` double-quoted (a common
    authoring slip: ``description: Use when: ...``), or ``None`` when nothing changed."""
    out, changed = [], False
    for line in raw.split("\n"):
        m = _TOP_LEVEL_VALUE.match(line)
        if m and ": " in m.group(2) and m.group(2)[:1] not in ("'", '"', "[", "{", "|", ">"):
            line = f"{m.group(1)}: {json.dumps(m.group(2))}"
            changed = True
        out.append(line)
    return "\n".join(out) if changed else None


def parse_skill_file(path: PathLike) -> ParsedSkillFile:
    """Read and split one ``SKILL.md``; never raises.

    Args:
        path: the file.

    Returns:
        The parts; ``frontmatter`` is ``None`` (with an ``"error"`` diagnostic) when the file
        cannot be read, has no front matter, or its YAML is invalid or not a mapping. A YAML
        error fixed by quoting values that hold ``": "`` loads, with a warning.
    """
    p = Path(path)

    def result(front: dict[str, Any] | None, body: str, *diags: tuple[str, str]) -> ParsedSkillFile:
        return ParsedSkillFile(
            p,
            front,
            body,
            [SkillDiagnostic(level, msg, str(p)) for level, msg in diags],  # type: ignore[arg-type]
        )

    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return result(None, "", ("error", f"Cannot read {p}: {exc.strerror or exc}"))
    raw, body = split_frontmatter(text)
    if raw is None:
        return result(
            None,
            body,
            ("error", "SKILL.md must start with YAML front matter between two '---' lines"),
        )
    notes: list[tuple[str, str]] = []
    try:
        front = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        fixed = _quote_colon_values(raw)
        try:
            front = yaml.safe_load(fixed) if fixed is not None else None
        except yaml.YAMLError:
            fixed = None
        if fixed is None:
            detail = str(exc).replace("\n", " ")
            return result(None, body, ("error", f"Invalid YAML in front matter: {detail}"))
        notes.append(
            (
                "warning",
                "Front matter is not valid YAML; loaded after quoting values that contain "
                "': ' (quote them in the file)",
            )
        )
    if front is None:
        front = {}
    if not isinstance(front, dict):
        return result(None, body, ("error", "Front matter must be a YAML mapping"), *notes)
    return result({str(k): v for k, v in front.items()}, body, *notes)


def _as_text(value: Any) -> str:
    if isinstance(value, (list, tuple, set)):
        return "; ".join(str(v) for v in value)
    return str(value)


def _split(value: str, separators: str) -> list[str]:
    return [part.strip() for part in re.split(f"[{re.escape(separators)}]", value) if part.strip()]


def load_skill(skill_dir: PathLike) -> tuple[SkillMeta | None, list[SkillDiagnostic]]:
    """Load the skill in folder ``skill_dir``.

    Args:
        skill_dir: the folder holding ``SKILL.md``.

    Returns:
        ``(meta, diagnostics)``; ``meta`` is ``None`` (with a ``"Skipped ..."`` error) when
        the skill has no usable ``name`` or ``description``. ``metadata.triggers``
        (``;``-separated), ``metadata.tags`` (``,``-separated) and ``metadata.priority`` (an
        integer) fill ``triggers``, ``tags`` and ``priority``; the same fields at the top level
        are reported and not used.
    """
    directory = Path(skill_dir).resolve()
    file = directory / SKILL_FILE
    parsed = parse_skill_file(file)
    diags = list(parsed.diagnostics)

    def note(level: str, message: str) -> None:
        diags.append(SkillDiagnostic(level, message, str(file)))  # type: ignore[arg-type]

    front = parsed.frontmatter
    if front is None:
        note("error", f"Skipped {file}: no usable front matter")
        return None, diags
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or not name.strip():
        note("error", f"Skipped {file}: the front matter needs a 'name' string")
        return None, diags
    if not isinstance(description, str) or not description.strip():
        note("error", f"Skipped {file}: the front matter needs a non-empty 'description'")
        return None, diags
    for msg in name_issues(name, directory.name) + description_issues(description.strip()):
        note("warning", msg)
    for msg in field_type_issues(front):
        note("warning", msg + "; ignored")
    for key in EXTENSION_FIELDS:
        if key in front:
            note("warning", f"Move {key} under 'metadata' (10xGraph reads it from there); ignored")
    unknown = sorted(k for k in front if k not in ALLOWED_FIELDS and k not in EXTENSION_FIELDS)
    if unknown:
        note("warning", f"Unexpected frontmatter fields: {', '.join(unknown)}; ignored")

    metadata: dict[str, str] = {}
    raw_meta = front.get("metadata")
    if isinstance(raw_meta, dict):
        converted = [str(k) for k, v in raw_meta.items() if not isinstance(v, str)]
        metadata = {str(k): v if isinstance(v, str) else _as_text(v) for k, v in raw_meta.items()}
        if converted:
            note(
                "warning",
                f"Metadata values must be strings; converted: {', '.join(converted)}",
            )
    priority = 0
    if "priority" in metadata:
        try:
            priority = int(metadata["priority"].strip())
        except ValueError:
            note("warning", f"Invalid priority {metadata['priority']!r} in metadata; using 0")
    tools = front.get("allowed-tools")
    try:
        meta = SkillMeta(
            name=name,
            description=description,
            license=front.get("license") if isinstance(front.get("license"), str) else None,
            compatibility=(
                front["compatibility"].strip()
                if isinstance(front.get("compatibility"), str) and front["compatibility"].strip()
                else None
            ),
            allowed_tools=tools.split() if isinstance(tools, str) else [],
            metadata=metadata,
            triggers=_split(metadata.get("triggers", ""), ";"),
            tags=set(_split(metadata.get("tags", ""), ",;")),
            priority=priority,
            skill_dir=str(directory),
            skill_file=str(file),
        )
    except pydantic.ValidationError as exc:
        reason = "; ".join(str(e["msg"]) for e in exc.errors())
        note("error", f"Skipped {file}: {reason}")
        return None, diags
    return meta, diags


def iter_skill_dirs(root: PathLike) -> Iterator[Path]:
    """The skill folders under ``root``, sorted by path: ``root`` itself when it holds a
    ``SKILL.md``, else its sub-folders holding one (searched up to 4 levels deep; hidden
    folders, ``node_modules`` and ``__pycache__`` are skipped, and a skill's own folders are
    not searched)."""
    base = Path(root)

    def walk(folder: Path, depth: int) -> Iterator[Path]:
        if (folder / SKILL_FILE).is_file():
            yield folder
            return
        if depth >= _MAX_DEPTH:
            return
        try:
            children = sorted(c for c in folder.iterdir() if c.is_dir())
        except OSError:
            return
        for child in children:
            if child.name.startswith(".") or child.name in IGNORED_DIRS:
                continue
            yield from walk(child, depth + 1)

    if base.is_dir():
        yield from walk(base, 0)


def discover_skills(
    dirs: PathLike | Sequence[PathLike],
) -> tuple[list[SkillMeta], list[SkillDiagnostic]]:
    """Load every skill under one directory or a list of them.

    Args:
        dirs: the directories, searched in order (see :func:`iter_skill_dirs`).

    Returns:
        ``(skills, diagnostics)``: the skills in directory order, then path order (the same
        name may appear twice; the registry keeps the first), and what was found wrong,
        including a warning for each directory that does not exist.
    """
    roots = [dirs] if isinstance(dirs, (str, os.PathLike)) else list(dirs)
    skills: list[SkillMeta] = []
    diags: list[SkillDiagnostic] = []
    for root in roots:
        if not Path(root).is_dir():
            diags.append(
                SkillDiagnostic("warning", f"Skills directory not found: {root}", str(root))
            )
            continue
        for folder in iter_skill_dirs(root):
            meta, found = load_skill(folder)
            diags.extend(found)
            if meta is not None:
                skills.append(meta)
    return skills, diags


def load_skill_content(meta: SkillMeta) -> str:
    """The body of ``meta``'s ``SKILL.md`` as it is on disk now (``""`` when unreadable)."""
    return parse_skill_file(meta.skill_file).body


def _hidden(rel: Path) -> bool:
    return any(p.startswith(".") or p == "__pycache__" for p in rel.parts) or rel.suffix == ".pyc"


def list_skill_files(meta: SkillMeta) -> list[str]:
    """The files bundled with a skill: every file of its folder except ``SKILL.md``, hidden
    files and folders, ``__pycache__`` and ``*.pyc``, and links leading out of the folder; as
    sorted ``/``-separated paths relative to the folder."""
    root = Path(meta.skill_dir)
    real_root = root.resolve()
    out: list[str] = []
    for folder, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        for fn in filenames:
            full = Path(folder) / fn
            rel = full.relative_to(root)
            if rel.as_posix() == SKILL_FILE or _hidden(rel):
                continue
            if not full.resolve().is_relative_to(real_root):
                continue
            out.append(rel.as_posix())
    return sorted(out)


def _error(meta: SkillMeta, path: str, message: str) -> SkillResourceError:
    return SkillResourceError(message, context={"skill": meta.name, "path": path})


def read_skill_file(meta: SkillMeta, path: str, max_bytes: int) -> str:
    """The text of a file (or the listing of a folder) of skill ``meta``.

    Args:
        meta: the skill.
        path: relative to the skill's folder; ``\\`` is read as ``/``.
        max_bytes: at most this many bytes are returned; longer files end with a
            ``[... truncated: showing the first N of M bytes]`` note.

    Returns:
        The text (invalid UTF-8 replaced by U+FFFD), a one-line description for a binary file
        (one holding a NUL byte), or the files of a folder, one per line.

    Raises:
        SkillResourceError: ``VALIDATION_000`` an empty or absolute path, a path whose real
            location (links followed) is outside the skill's folder, or no such file.
    """
    if not path or not path.strip():
        raise _error(meta, path, "The file path must not be empty")
    rel = path.strip().replace("\\", "/")
    if rel.startswith("/") or re.match(r"^[A-Za-z]:", rel):
        raise _error(meta, path, f"Path {path!r} must be relative to the skill directory")
    root = Path(meta.skill_dir).resolve()
    target = (root / rel).resolve()
    if not target.is_relative_to(root):
        raise _error(meta, path, f"Path {path!r} resolves outside the skill directory; refused")
    if target.is_dir():
        prefix = target.relative_to(root).as_posix()
        files = [f for f in list_skill_files(meta) if prefix == "." or f.startswith(prefix + "/")]
        return f"Files in {prefix}/ of skill {meta.name!r}:\n" + "\n".join(files)
    if not target.is_file():
        raise _error(meta, path, f"File {path!r} not found in skill {meta.name!r}")
    size = target.stat().st_size
    with target.open("rb") as fh:
        data = fh.read(max(max_bytes, _BINARY_PROBE))
    if b"\x00" in data[:_BINARY_PROBE]:
        return f"[{rel}: binary file, {size} bytes; not shown]"
    text = data[:max_bytes].decode("utf-8", errors="replace")
    if size > max_bytes:
        text += f"\n[... truncated: showing the first {max_bytes} of {size} bytes]"
    return text
