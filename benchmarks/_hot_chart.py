"""The hot-path chart of a ``run_all.py`` run: ms per step and thread-load latency against the
thread's length, log scales, tenxgraph's stores beside LangGraph's.

Left: ms per durable step (medians) at 10 to 5,000 messages of history, per contender of the
growth section, the one-round-trip floor dotted. Right: reading a thread (``get_state``) at its
length in messages: tenxgraph Postgres warm, cold from Redis and cold from Postgres (the load
section), and, from the turn-by-turn section (one turn = two messages), LangGraph's default
saver and ``DeltaChannel`` beside tenxgraph Postgres.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

STYLE = {
    "tenxgraph memory": ("#2e7d32", "-"),
    "tenxgraph SQLite": ("#00838f", "-"),
    "tenxgraph Postgres": ("#1565c0", "-"),
    "tenxgraph Postgres+Redis+LRU": ("#6a1b9a", "-"),
    "LangGraph InMemorySaver": ("#ef6c00", "--"),
    "LangGraph PostgresSaver": ("#c62828", "--"),
    "LangGraph DeltaChannel (snapshot every 100)": ("#8d6e63", "--"),
    "floor: BEGIN+INSERT+COMMIT, 1 round trip": ("#616161", ":"),
}


def draw(res: dict[str, Any], path: Path) -> None:
    """Draw the chart of ``res`` (``run_all.run``'s results) to the PNG ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    points = (res.get("growth") or {}).get("points") or {}
    names: list[str] = []
    for per in points.values():
        names += [n for n in per if n not in names]
    for name in names:
        xs, ys = [], []
        for h in sorted(points):
            pr = points[h].get(name)
            ms = pr.ms if pr is not None else None
            if ms is not None:
                xs.append(h)
                ys.append(ms.median)
        if xs:
            colour, ls = STYLE.get(name, (None, "-"))
            left.plot(xs, ys, ls, marker="o", color=colour, label=name)
    left.set(xscale="log", yscale="log", xlabel="messages of history", ylabel="ms per step")
    left.set_title("Per durable step")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=7)

    load = res.get("load") or {}
    # one colour per way of loading, so warm, cold-from-Redis and cold-from-Postgres read apart
    for key, label, ls, colour in (
        ("warm_get_state", "tenxgraph Postgres+Redis+LRU, warm", "-", "#2e7d32"),
        ("cold_redis_get_state", "tenxgraph, cold from Redis", "-.", "#6a1b9a"),
        ("cold_pg_get_state", "tenxgraph Postgres, cold", "--", "#1565c0"),
    ):
        pts = [(r["messages"], r[key]["median"]) for r in load.get("rows", []) if r.get(key)]
        if pts:
            right.plot(*zip(*pts, strict=True), ls, marker="o", color=colour, label=label)
    for c in (res.get("turns") or {}).get("contenders", []):
        pts = [(2 * r["turns"], r["read_ms"]["median"]) for r in c["rows"] if "read_ms" in r]
        if pts:
            colour, ls = STYLE.get(c["name"], ("#555555", "--"))
            label = c["name"] + (" (turn by turn)" if c["name"].startswith("tenxgraph") else "")
            right.plot(
                *zip(*pts, strict=True), ls, marker="s", color=colour, label=label, alpha=0.8
            )
    right.set(xscale="log", yscale="log", xlabel="messages in the thread", ylabel="ms per read")
    right.set_title("Loading a thread (get_state)")
    right.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
