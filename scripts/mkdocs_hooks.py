"""mkdocs hooks of the documentation site (mkdocs.yml ``hooks:``).

- ``<!-- error-codes -->`` in a page is replaced by the table of every error code, generated
  from the registry ``tenxgraph.core.exceptions.ERROR_CODES`` at build time, so the table cannot
  drift from the code.
- Sphinx cross-reference roles left in docstrings (``:class:`X```) are rendered as plain code
  instead of showing the role's name as text.
- When ``scripts/docs-deps.sh`` has fetched mermaid into ``.cache/docs/``, the site ships it
  (``assets/javascripts/mermaid.min.js``), and the theme uses it instead of loading mermaid from
  a CDN: diagrams render offline and no page fetches a third-party script.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

MARKER = "<!-- error-codes -->"
MERMAID = Path(__file__).resolve().parents[1] / ".cache" / "docs" / "mermaid.min.js"
MERMAID_URL = "assets/javascripts/mermaid.min.js"
_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|data|attr|mod|exc|obj):<code>(~?)([^<]*)</code>")


def _plain(match: re.Match[str]) -> str:
    # ":class:`~a.b.C`" shows "C" in Sphinx; ":class:`a.b.C`" shows the whole path.
    target = match.group(2)
    return f"<code>{target.rsplit('.', 1)[-1] if match.group(1) else target}</code>"


def _most_specific(classes: list[type]) -> type | None:
    # The class deepest in the hierarchy: GraphError, not its base TenxGraphError (both have
    # default_code GRAPH_000); UnsupportedArgumentError rather than GraphError for GRAPH_010.
    return max(classes, key=lambda cls: len(cls.__mro__), default=None)


def error_code_rows() -> list[tuple[str, str, str]]:
    """``(code, raising class, meaning)`` for every code of the registry, in registry order.

    The class is, in this order of preference: the most specific error class whose
    ``default_code`` is the code; else the most specific class whose docstring names the code
    (``GRAPH_010`` is raised as ``UnsupportedArgumentError``); else the most specific class
    whose ``default_code`` shares the code's family prefix (``STORAGE_FORBIDDEN_001`` is raised
    as ``StorageError``, ``GRAPH_ROUTING_001`` as ``GraphError``).
    """
    from tenxgraph.core import exceptions as exc
    from tenxgraph.models import ModelError

    classes = [
        obj
        for name in exc.__all__
        if isinstance(obj := getattr(exc, name), type) and issubclass(obj, exc.TenxGraphError)
    ]
    classes.append(ModelError)
    rows = []
    for code, meaning in exc.ERROR_CODES.items():
        family = code.split("_", 1)[0]
        cls = (
            _most_specific([c for c in classes if c.default_code == code])
            or _most_specific([c for c in classes if f"``{code}``" in (c.__doc__ or "")])
            or _most_specific([c for c in classes if c.default_code == f"{family}_000"])
            or exc.TenxGraphError
        )
        rows.append((code, cls.__name__, meaning))
    return rows


def error_code_table() -> str:
    """The Markdown table of ``error_code_rows()``."""
    lines = ["| error_code | raised as | meaning |", "| --- | --- | --- |"]
    for code, name, meaning in error_code_rows():
        cell = meaning.replace("|", "\\|")
        lines.append(f"| `{code}` | `{name}` | {cell} |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, error_code_table())
    return markdown


def on_page_content(html: str, **_: Any) -> str:
    return _ROLE.sub(_plain, html)


def on_config(config: Any, **_: Any) -> Any:
    if MERMAID.is_file():
        config.extra_javascript.append(MERMAID_URL)
    return config


def on_post_build(config: Any, **_: Any) -> None:
    if MERMAID.is_file():
        target = Path(config.site_dir) / MERMAID_URL
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(MERMAID, target)
        shutil.copyfile(
            MERMAID.with_suffix("").with_suffix(".LICENSE"), target.with_name("mermaid.LICENSE")
        )
