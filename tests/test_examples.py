"""Every program in examples/ runs as documented (``python examples/X.py``) and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def test_the_documented_examples_exist():
    names = {p.name for p in EXAMPLES}
    assert {
        "quickstart.py",
        "concurrent_retry.py",
        "crash_and_resume.py",
        "idempotent_tool.py",
        "tracing.py",
    } <= names


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(example: Path, tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-W", "default", str(example)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.strip()
    # under -W default: no ResourceWarning, no "Task was destroyed", nothing at exit
    for noise in ("Warning", "Task was destroyed", "never retrieved", "Traceback"):
        assert noise not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_uses_only_the_public_api(example: Path):
    """Examples are what users copy: no private config keys (``config["_checkpoint_version"]``)
    and no private modules or names (``tenxgraph._x``, ``from ... import _x``)."""
    import re

    source = example.read_text()
    assert not re.search(r"\[\s*['\"]_\w+['\"]\s*\]", source), "reads a private config key"
    assert not re.search(r"tenxgraph(\.\w+)*\._\w+", source), "imports a private module"
    assert not re.search(r"from tenxgraph\S* import .*\b_\w+", source), "imports a private name"
