#!/usr/bin/env bash
# Runs 10xGraph 0.10.3's released test suite (from its PyPI source distribution) against this
# checkout's tenxgraph, from a scratch folder outside the repository, and prints a per-file table.
# Only the sdist's tests/ folder is used; its own package folders are never put on the path.
# It runs in its own scratch venv (this checkout installed editable), because the suite's
# pytest-asyncio must not be installed next to the project's own anyio-based test settings.
# Usage: scripts/run-10xgraph-suite.sh [extra pytest args]   (env: SUITE_DIR, BASE_PYTHON)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
scratch="${SUITE_DIR:-${TMPDIR:-/tmp}/tenxgraph-10xgraph-suite}"
version=0.10.3
case "$scratch" in "$repo"*) echo "SUITE_DIR must be outside the repository" >&2; exit 2;; esac

py="$scratch/venv/bin/python"
if [ ! -x "$py" ]; then
  "${BASE_PYTHON:-python3}" -m venv "$scratch/venv"
fi
# The suite's own test tools (pytest-asyncio, pytest-env), Pillow and piexif for its images, and
# tenxgraph with its google extra (the suite converts prompts to google-genai objects).
if ! "$py" -m pip install -q pytest pytest-asyncio pytest-env Pillow piexif -e "$repo[google]" \
  >"$scratch/pip.log" 2>&1; then
  tail -20 "$scratch/pip.log" >&2
  echo "installing the suite's venv failed (whole log: $scratch/pip.log)" >&2
  exit 1
fi

mkdir -p "$scratch/sdist"
if [ ! -f "$scratch/sdist/10xgraph-$version.tar.gz" ]; then
  "$py" -m pip download -q --no-deps --no-binary :all: --ignore-requires-python \
    "10xgraph==$version" -d "$scratch/sdist" 2>/dev/null
fi
rm -rf "$scratch/run" && mkdir -p "$scratch/run"
tar xzf "$scratch/sdist/10xgraph-$version.tar.gz" -C "$scratch/run" "10xgraph-$version/tests"
mv "$scratch/run/10xgraph-$version/tests" "$scratch/run/tests"
rm -rf "$scratch/run/10xgraph-$version"

# The suite's pytest settings (ENVIRONMENT=pytest via pytest-env, its markers), without coverage.
cat >"$scratch/run/pytest.ini" <<'INI'
[pytest]
testpaths = tests
env =
    ENVIRONMENT=pytest
asyncio_mode = strict
asyncio_default_fixture_loop_scope = function
filterwarnings = ignore::DeprecationWarning
markers =
    asyncio: mark test as async test
    integration: mark test as integration test requiring real databases
    slow: mark test as slow test that takes longer to run
INI
# `import agentflow` (used by its alias test) resolves to tenxgraph through a tiny shim module
# placed in the scratch folder only when tenxgraph does not provide one itself.
if ! "$py" -c "import agentflow" 2>/dev/null; then
  mkdir -p "$scratch/run/shim"
  printf 'import sys\nimport tenxgraph\n\nsys.modules[__name__] = tenxgraph\n' >"$scratch/run/shim/agentflow.py"
  export PYTHONPATH="$scratch/run/shim${PYTHONPATH:+:$PYTHONPATH}"
fi

cd "$scratch/run"
"$py" - <<'PY' || true
import tenxgraph, sys
print("tenxgraph from", tenxgraph.__file__, file=sys.stderr)
PY
set +e
"$py" -m pytest -p no:cacheprovider -q -o addopts= -rN --junitxml="$scratch/run/junit.xml" \
  --continue-on-collection-errors "$@" >"$scratch/run/pytest.log" 2>&1
set -e
tail -3 "$scratch/run/pytest.log"
"$py" - "$scratch/run/junit.xml" "$scratch/run/tests" <<'PY'
import collections, pathlib, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
stats: dict = collections.defaultdict(collections.Counter)
for case in root.iter("testcase"):
    name = (case.get("classname") or case.get("name", "")).split(".")
    mod = next((p for p in name if p.startswith("test_")), name[-1] if name else "?")
    kids = {c.tag for c in case}
    kind = ("failed" if kids & {"failure", "error"} else "skipped" if "skipped" in kids else "passed")
    stats[mod][kind] += 1
for f in sorted(pathlib.Path(sys.argv[2]).glob("test_*.py")):
    stats.setdefault(f.stem, collections.Counter())
print(f"{'file':40} {'pass':>5} {'fail':>5} {'skip':>5}")
tot = collections.Counter()
for mod in sorted(stats):
    c = stats[mod]; tot.update(c)
    print(f"{mod:40} {c['passed']:5} {c['failed']:5} {c['skipped']:5}")
print(f"{'TOTAL':40} {tot['passed']:5} {tot['failed']:5} {tot['skipped']:5}")
PY
