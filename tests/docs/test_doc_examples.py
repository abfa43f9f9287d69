"""Every fenced Python block of ``docs/`` and ``README.md`` runs, with pytest-examples.

The blocks of one page run in order in one namespace, as a reader pasting them into one Python
session would (later blocks use what earlier ones defined). Conventions of the fence line:

- ``py title="app.py"``: a file the page tells the reader to save. It is saved under that
  name in the working directory and compiled; it runs when later blocks import it or start it
  (``python app.py``), as for the reader (run as a block it would run as ``__main__``).
- ``py test="skip"``: the block is not run. Each such block is listed in ``SKIPPED`` below with
  the reason, so a skip is always a decision, and there are few.

Each page runs in a fresh temporary directory, with its own Postgres schema (dropped afterwards)
and its own Redis keys (deleted afterwards). Blocks read the servers from the environment as an
application would: ``TENXGRAPH_DSN``, ``TENXGRAPH_REDIS_URL``, ``TENXGRAPH_SCHEMA`` (and, for the
deployment page, ``TENXGRAPH_PGBOUNCER_DSN`` and ``TENXGRAPH_REDIS_CLUSTER_URL``; a schema named
``<TENXGRAPH_SCHEMA>_...`` is dropped with the page's own). Processes a
page started and left running (``subprocess.Popen`` objects in its namespace) are killed.

Pages whose agents call a model (``MODEL_PAGES``) get ``OPENAI_BASE_URL`` pointing at the
scripted OpenAI-compatible server of ``tests/agent/_fake_llm_server.py`` (a real HTTP server on
127.0.0.1 answering with ``plausible_reply``), started for the page and stopped after it, and
``OPENAI_API_KEY`` set to a dummy key.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_examples import CodeExample, EvalExample, find_examples

ROOT = Path(__file__).resolve().parents[2]
PG_DSN = os.environ.get("TENXGRAPH_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TENXGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PGBOUNCER_DSN = os.environ.get(
    "TENXGRAPH_TEST_PGBOUNCER_DSN", "postgresql://postgres@127.0.0.1:6432/test"
)
REDIS_CLUSTER_URL = os.environ.get("TENXGRAPH_TEST_REDIS_CLUSTER_URL", "redis://127.0.0.1:7001")

#: (page, first line of the block) -> why it is not run.
SKIPPED: dict[tuple[str, str], str] = {
    ("docs/telemetry.md", "from opentelemetry import metrics, trace"): (
        "needs the OTLP exporter package and a collector; docs/how-to/tracing.md runs the same "
        "setup with an in-memory exporter"
    ),
    (
        "docs/how-to/tracing.md",
        "from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter",
    ): (
        "needs the OTLP exporter package and a collector listening; the same setup with the "
        "in-memory exporter runs just below it"
    ),
}


def _pages() -> dict[str, list[CodeExample]]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    pages: dict[str, list[CodeExample]] = {}
    for ex in find_examples(*files):
        pages.setdefault(ex.path.relative_to(ROOT).as_posix(), []).append(ex)
    for blocks in pages.values():
        blocks.sort(key=lambda ex: ex.start_line)
    return pages


PAGES = _pages()

#: Pages whose blocks call a model through OPENAI_BASE_URL.
MODEL_PAGES = {"docs/how-to/agents.md", "docs/how-to/prebuilt-agents.md"}


def _scripted_server_module() -> Any:
    import importlib.util

    path = ROOT / "tests" / "agent" / "_fake_llm_server.py"
    spec = importlib.util.spec_from_file_location("_docs_fake_llm_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _first_line(ex: CodeExample) -> str:
    return next(line.strip() for line in ex.source.splitlines() if line.strip())


def test_every_page_with_python_is_collected():
    """The collector sees the pages that teach with code (a fence it cannot parse would make a
    page silently untested)."""
    expected = {
        "README.md",
        "docs/index.md",
        "docs/tutorial.md",
        "docs/how-to/checkpointers.md",
        "docs/how-to/conflicts.md",
        "docs/how-to/crash-recovery.md",
        "docs/how-to/idempotent-tools.md",
        "docs/how-to/human-in-the-loop.md",
        "docs/how-to/streaming.md",
        "docs/how-to/tracing.md",
        "docs/how-to/migrate-langgraph.md",
        "docs/how-to/agents.md",
    }
    assert expected <= set(PAGES)
    for path in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        fences = [
            line.strip()
            for line in path.read_text().splitlines()
            if line.strip().startswith("```py")
        ]
        found = PAGES.get(path.relative_to(ROOT).as_posix(), [])
        assert len(fences) == len(found), path


def test_skips_are_declared_and_few():
    skipped = {
        (page, _first_line(ex))
        for page, blocks in PAGES.items()
        for ex in blocks
        if ex.prefix_settings().get("test") == "skip"
    }
    assert skipped == set(SKIPPED), 'a block marked test="skip" needs an entry in SKIPPED'
    total = sum(len(blocks) for blocks in PAGES.values())
    assert len(skipped) <= max(3, total // 10)


@pytest.fixture
def page_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Path]:
    """A fresh working directory, Postgres schema and Redis namespace for one page (and the
    scripted model server for the pages of ``MODEL_PAGES``)."""
    import psycopg
    import redis

    from tenxgraph.storage.checkpointer.postgres import redis_namespace

    schema = "docs_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    monkeypatch.setenv("TENXGRAPH_DSN", PG_DSN)
    monkeypatch.setenv("TENXGRAPH_REDIS_URL", REDIS_URL)
    monkeypatch.setenv("TENXGRAPH_SCHEMA", schema)
    monkeypatch.setenv("TENXGRAPH_PGBOUNCER_DSN", PGBOUNCER_DSN)
    monkeypatch.setenv("TENXGRAPH_REDIS_CLUSTER_URL", REDIS_CLUSTER_URL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    model_server = None
    if (
        getattr(request.node, "callspec", None)
        and request.node.callspec.params.get("page") in MODEL_PAGES
    ):
        fake = _scripted_server_module()
        model_server = fake.ScriptedLLMServer(responder=fake.plausible_reply)
        monkeypatch.setenv("OPENAI_BASE_URL", model_server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "docs-test-key")
    modules_before = set(sys.modules)
    try:
        yield tmp_path
    finally:
        if model_server is not None:
            model_server.close()
        for name in set(sys.modules) - modules_before:
            mod = sys.modules.get(name)
            if mod is not None and str(getattr(mod, "__file__", "") or "").startswith(
                str(tmp_path)
            ):
                del sys.modules[name]
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            # the page's schema and any schema it derived from it ("<schema>_...")
            names = conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname = %s OR nspname LIKE %s",
                (schema, schema + "\\_%"),
            ).fetchall()
            for (name,) in names:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        client = redis.Redis.from_url(REDIS_URL)
        try:
            pattern = f"tenxgraph:{redis_namespace(PG_DSN, schema, 'tenxgraph_')}:*"
            keys = list(client.scan_iter(match=pattern, count=1000))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


def _describe(exc: BaseException) -> str:
    """The exception and its causes, with the innermost frames (file:line function)."""
    parts = []
    while exc is not None and len(parts) < 4:
        try:
            frames = [
                f"  {f.filename}:{f.lineno} {f.name}"
                for f in traceback.extract_tb(exc.__traceback__)[-6:]
            ]
        except Exception:  # noqa: BLE001 - pytest-examples' rewritten frames have no positions
            frames = []
        parts.append("\n".join([*frames, f"{type(exc).__name__}: {exc}"]))
        exc = exc.__cause__ or exc.__context__
    return "\n-- caused by --\n".join(parts)


def _kill_leftovers(namespace: dict[str, Any]) -> None:
    procs: list[subprocess.Popen] = []
    for value in namespace.values():
        if isinstance(value, subprocess.Popen):
            procs.append(value)
        elif isinstance(value, list | tuple | dict):
            items = value.values() if isinstance(value, dict) else value
            procs.extend(v for v in items if isinstance(v, subprocess.Popen))
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_examples_run(page: str, page_env: Path, eval_example: EvalExample):
    namespace: dict[str, Any] = {}
    try:
        for ex in PAGES[page]:
            settings = ex.prefix_settings()
            if settings.get("test") == "skip":
                continue
            title = settings.get("title")
            if title and title.endswith(".py"):
                (page_env / title).write_text(ex.source)
                compile(ex.source, title, "exec")
                continue
            failure = None
            try:
                result = eval_example.run(ex, module_globals=namespace)
            except Exception as exc:  # noqa: BLE001 - reported with the block's place in the page
                failure = f"{page}, block at line {ex.start_line}:\n{_describe(exc)}"
            if failure is not None:
                # Outside the except block: pytest cannot render the chained traceback of code
                # run by pytest-examples (its frames point into a generated file).
                pytest.fail(failure, pytrace=False)
            namespace = {k: v for k, v in result.items() if not k.startswith("__")}
    finally:
        _kill_leftovers(namespace)


def test_blocks_read_the_environment_with_defaults():
    """A reader pasting a block gets a working program, not a KeyError: every variable a block
    reads has a default (the local services of ``scripts/services.sh``)."""
    import re

    read = re.compile(r"os\.environ\[[^\]]+\](?!\s*=[^=])")  # a read, not an assignment
    offenders = [
        f"{page}:{ex.start_line}: {match.group(0)}"
        for page, blocks in PAGES.items()
        for ex in blocks
        for match in read.finditer(ex.source)
    ]
    assert not offenders, offenders


def test_install_commands_work_from_a_checkout():
    """tenxgraph is not on PyPI: no page may tell a reader to ``pip install tenxgraph...``."""
    import re

    wrong = re.compile(r"pip install\s+(-\S+\s+)*['\"]?tenxgraph\b")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if wrong.search(line)
    ]
    assert not offenders, offenders


def test_threads_commands_are_not_called_read_only():
    """``threads delete`` exists, so neither the README nor the CLI's help may say the
    ``threads`` commands are read-only."""
    help_text = subprocess.run(
        [sys.executable, "-m", "tenxgraph.cli", "threads", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "delete" in help_text
    for text in (
        help_text,
        (ROOT / "README.md").read_text(),
        (ROOT / "docs/how-to/cli.md").read_text(),
    ):
        assert "read-only" not in " ".join(text.lower().split())


def test_every_block_is_valid_python_as_a_file():
    """A block pasted into a file must compile: no top-level ``await`` (a SyntaxError outside a
    notebook or the asyncio REPL). Skipped blocks are checked too."""
    broken = []
    for page, blocks in PAGES.items():
        for ex in blocks:
            try:
                compile(ex.source, f"{page}:{ex.start_line}", "exec")
            except SyntaxError as exc:
                broken.append(f"{page}:{ex.start_line}: {exc.msg}")
    assert not broken, broken
