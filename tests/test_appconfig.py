"""The deployment config file (tenxgraph.appconfig), as `serve` and `worker` read it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from tenxgraph.appconfig import find_config, load_config, load_graph
from tenxgraph.core.exceptions import ConfigError

GRAPH_MODULE = """
from tenxgraph.core.graph import StateGraph
from tenxgraph.utils import END
import os

def reply(state):
    return "hi " + os.environ.get("APPCFG_GREETING", "?")

g = StateGraph()
g.add_node("reply", reply)
g.set_entry_point("reply")
g.add_edge("reply", END)
app = g.compile()

def make():
    return app

async def amake():
    return app

not_a_graph = 42
"""


def _project(tmp_path: Path, mod: str, **cfg: object) -> Path:
    (tmp_path / f"{mod}.py").write_text(GRAPH_MODULE)
    path = tmp_path / "10xgraph.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("attr", ["app", "make", "amake"])
def test_loads_the_graph_a_config_names(tmp_path: Path, attr: str) -> None:
    mod = f"appcfg_graph_{attr}"
    path = _project(tmp_path, mod, agent=f"{mod}:{attr}", env=".env", auth=None, extra_key=1)
    (tmp_path / ".env").write_text("# comment\nexport APPCFG_GREETING='there'\n")
    os.environ.pop("APPCFG_GREETING", None)
    cfg = load_config(path)
    assert cfg.agent == f"{mod}:{attr}" and cfg.extra == {"extra_key": 1}
    assert find_config(tmp_path) == path.resolve()
    graph = anyio.run(load_graph, cfg)
    out = graph.invoke({"messages": [{"role": "user", "content": "x"}]}, {"thread_id": "t"})
    assert out["messages"][-1].text() == "hi there"
    os.environ.pop("APPCFG_GREETING", None)


@pytest.mark.parametrize(
    ("cfg", "key"),
    [
        ({}, "agent"),
        ({"agent": "no_colon"}, "agent"),
        ({"agent": "m:a", "env": "missing.env"}, "env"),
        ({"agent": "m:a", "auth": "oauth"}, "auth"),
        ({"agent": "m:a", "auth": {"method": "custom"}}, "auth.path"),
    ],
)
def test_bad_configs_are_refused_naming_the_key(tmp_path: Path, cfg: dict, key: str) -> None:
    path = tmp_path / "agentflow.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ConfigError) as ei:
        load_config(path)
    assert ei.value.error_code == "CONFIG_001" and ei.value.context["key"] == key


def test_missing_or_wrong_targets(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        find_config(tmp_path)
    with pytest.raises(ConfigError):
        load_config(tmp_path / "nope.json")
    path = _project(tmp_path, "appcfg_graph_bad", agent="appcfg_graph_bad:not_a_graph")
    with pytest.raises(ConfigError, match="not a compiled graph"):
        anyio.run(load_graph, load_config(path))
    with pytest.raises(ConfigError, match="no attribute"):
        anyio.run(load_graph, "appcfg_graph_bad:missing")
    with pytest.raises(ConfigError, match="cannot import"):
        anyio.run(load_graph, "appcfg_no_such_module:app")


def test_import_in_a_fresh_interpreter(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        from tenxgraph.appconfig import AppConfig, find_config, load_config, load_graph
        print("ok")
    """)
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_apply_env_sets_the_env_file_before_the_graph_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tenxgraph.appconfig import apply_env

    key = "TENXGRAPH_TEST_APPLY_ENV"
    monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv(key + "_SET", "kept")
    (tmp_path / ".env").write_text(f"# comment\n{key}='from file'\n{key}_SET=ignored\n")
    (tmp_path / "10xgraph.json").write_text(json.dumps({"agent": "m:app", "env": ".env"}))
    apply_env(load_config(tmp_path / "10xgraph.json"))
    assert os.environ[key] == "from file" and os.environ[key + "_SET"] == "kept"
    monkeypatch.delenv(key)
    (tmp_path / "none.json").write_text(json.dumps({"agent": "m:app"}))
    apply_env(load_config(tmp_path / "none.json"))  # no env file: nothing set
    assert key not in os.environ
