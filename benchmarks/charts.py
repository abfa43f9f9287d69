"""Charts of the latest benchmark run, drawn from the tables ``run_all.py`` wrote into
``docs/benchmarks.md`` (between its ``run_all`` markers), saved as PNGs for the docs site.

Run: python benchmarks/charts.py   (needs matplotlib: pip install -e '.[bench]')

Writes ``docs/assets/benchmarks/{growth,cpu,wal}.png``. The numbers are the medians of the
tables; the shaded bands are their (min-max) ranges. Re-run after ``run_all.py --out``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
OUT = ROOT / "docs" / "assets" / "benchmarks"
HISTORY = [10, 100, 1_000, 5_000]

#: contender -> (colour, line style); the contenders drawn, in legend order.
STYLE = {
    "tenxgraph memory": ("#2e7d32", "-"),
    "tenxgraph SQLite": ("#00838f", "-"),
    "tenxgraph Postgres": ("#1565c0", "-"),
    "tenxgraph Postgres+Redis+LRU": ("#6a1b9a", "-"),
    "LangGraph InMemorySaver": ("#ef6c00", "--"),
    "LangGraph PostgresSaver": ("#c62828", "--"),
    "floor: BEGIN+INSERT+COMMIT, 1 round trip": ("#616161", ":"),
}

_CELL = re.compile(r"^([\d,.]+) \(([\d,.]+)-([\d,.]+)\)")


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def parse_cell(cell: str) -> tuple[float, float, float] | None:
    """``"8.56 (5.93-10.97)"`` -> ``(8.56, 5.93, 10.97)``; ``None`` for ``-`` and the like."""
    m = _CELL.match(cell.strip())
    return (_num(m[1]), _num(m[2]), _num(m[3])) if m else None


def tables_after(text: str, heading: str) -> list[list[list[str]]]:
    """The Markdown tables between ``heading`` and the next ``## `` heading, as rows of cells
    (header row first, the ``---`` row dropped)."""
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    tables, current = [], []
    for line in section.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= {"-", " "} for c in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def series(table: list[list[str]], first_col: int) -> dict[str, list[tuple[float, float, float]]]:
    """contender -> one ``(median, min, max)`` per history length, for the drawn contenders."""
    out = {}
    for row in table[1:]:
        if row[0] in STYLE:
            cells = [parse_cell(c) for c in row[first_col : first_col + len(HISTORY)]]
            if all(cells):
                out[row[0]] = cells
    return out


def draw(
    data: dict[str, list[tuple[float, float, float]]], title: str, ylabel: str, path: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.6), dpi=110)
    for name in STYLE:
        if name not in data:
            continue
        colour, style = STYLE[name]
        med = [c[0] for c in data[name]]
        ax.plot(HISTORY, med, style, color=colour, marker="o", label=name, linewidth=2)
        ax.fill_between(
            HISTORY,
            [c[1] for c in data[name]],
            [c[2] for c in data[name]],
            color=colour,
            alpha=0.12,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(HISTORY, [f"{h:,}" for h in HISTORY])
    ax.set_xlabel("messages already in the thread")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--page", type=Path, default=PAGE, help="the results page to read")
    ap.add_argument("--out", type=Path, default=OUT, help="folder of the PNGs")
    args = ap.parse_args(argv)
    text = args.page.read_text(encoding="utf-8")
    growth_ms, growth_cpu = tables_after(text, "## Growth with thread length")[:2]
    wal = tables_after(text, "## Bytes written per step")[0]
    # The WAL table has a "measure" column and a "fresh thread" column before the lengths.
    wal_rows = [row for row in wal if row[0] == "contender" or "WAL" in row[1]]
    draw(
        series(growth_ms, 1),
        "Time per step as the thread grows (per-step checkpoints)",
        "ms per step (log)",
        args.out / "growth.png",
    )
    draw(
        series(growth_cpu, 1),
        "Client CPU per step as the thread grows",
        "client CPU ms per step (log)",
        args.out / "cpu.png",
    )
    draw(
        series(wal_rows, 3),
        "PostgreSQL WAL bytes written per step",
        "WAL bytes per step (log)",
        args.out / "wal.png",
    )
    print(f"wrote {', '.join(sorted(p.name for p in args.out.glob('*.png')))} to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
