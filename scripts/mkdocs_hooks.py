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


def error_code_rows() -> list[tuple[str, str, str]]:
    """``(code, raising class, meaning)`` for every code of the registry, in registry order.

    The class is the error class whose ``default_code`` is the code, else the nearest class
    whose code prefix matches (``STORAGE_FORBIDDEN_001`` is raised as ``StorageError``).
    """
    from tenxgraph.core import exceptions as exc

    classes = [
        obj
        for name in exc.__all__
        if isinstance(obj := getattr(exc, name), type) and issubclass(obj, exc.TenxGraphError)
    ]
    from tenxgraph.models import ModelError

    by_default = {cls.default_code: cls.__name__ for cls in [*classes, ModelError]}
    rows = []
    for code, meaning in exc.ERROR_CODES.items():
        name = by_default.get(code)
        if name is None:
            family = code.split("_", 1)[0]
            name = by_default.get(f"{family}_000", "TenxGraphError")
        rows.append((code, name, meaning))
    return rows


def error_code_table() -> str:
    """The Markdown table of :func:`error_code_rows`."""
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
        shutil.copyfile(MERMAID.with_suffix("").with_suffix(".LICENSE"), target.with_name("mermaid.LICENSE"))
