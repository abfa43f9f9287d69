"""Run 10xGraph's documented provider examples against local provider wire servers.

Usage::

    .venv/bin/python scripts/run-10xgraph-doc-examples.py DOCS_REPO [--page SUBSTR] [-v]

``DOCS_REPO`` is a git directory of 10xGraph's documentation (its ``docs/`` tree is read from
``HEAD``). The script picks every Python example that uses ``provider="google"`` /
``"anthropic"``, ``reasoning_config``, ``fallback_models`` or the handoff helpers, every
example of the getting-started pages, and the stop-stream tutorial's (async-generator nodes),
and runs each one unchanged but for the import rename ``agentflow`` -> ``tenxgraph`` in a
fresh interpreter. Nothing of the docs is written into this repository: the examples live in
a temporary directory for the run.

The model servers are the wire-protocol servers of ``tests/providers/_wire_servers.py`` (Gemini,
Anthropic, OpenAI chat completions and Responses) on 127.0.0.1; the SDKs find them through
``GOOGLE_GEMINI_BASE_URL``, ``ANTHROPIC_BASE_URL`` and ``OPENAI_BASE_URL`` (dummy keys). They
answer like a model would: with tools offered and no tool result yet, a call of the first
tool with arguments made from its JSON schema; with an output schema, a JSON object made from
it; otherwise a short text naming the model.

A result is one of:

* ``ok``: the program exited 0 (within the timeout); the model requests it made are counted
  per provider, and a page's example that names a provider must have reached that provider's
  server (else ``FAIL``).
* ``ok (with the page's earlier blocks)``: the example continues code shown earlier on its
  page (it names something defined there); run after those blocks it exits 0.
* ``fragment``: not a complete program (a syntax fragment, or a name neither it nor the page
  defines), so there is nothing to run unchanged.
* ``needs X``: it imports a third-party package or service that is not part of tenxgraph
  (an MCP server, ...).
* ``out-of-scope``: it needs a feature docs/compat-10xgraph.md lists as not provided (a Qdrant
  store, the memory tools...); ``KNOWN`` names the example and the error it must raise.
* ``FAIL``: anything else (the error's last line is shown).

This script is a tool for developers; the test suite does not use it.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.providers._wire_servers import (  # noqa: E402
    Answer,
    AnthropicServer,
    GeminiServer,
    OpenAIServer,
)

PATTERNS = (
    'provider="google"',
    "provider='google'",
    'provider="anthropic"',
    "provider='anthropic'",
    "reasoning_config",
    "fallback_models",
    "create_handoff_tool",
    "is_handoff_tool",
)


def _tiny_png() -> bytes:
    """A valid 2x2 grey PNG, standing in for an image file a page expects the reader to have."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 2, 2, 8, 0, 0, 0, 0)  # 2x2, 8-bit greyscale
    pixels = zlib.compress(b"\x00\x80\x80\x00\x80\x80")  # filter byte + 2 pixels per row
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


#: examples whose failure is the page's own or needs an out-of-scope feature:
#: (page, index) -> (the error it raises, verdict)
KNOWN = {
    ("docs/how-to/python/emit-tool-progress.md", 6): (
        "'str' object has no attribute 'name'",
        "page error: reads chunk.event.name, but chunk.event is a plain str "
        "(use_enum_values), as the stream-graph page and the reference state",
    ),
    ("docs/prebuild/agents/rag-agent.md", 5): (
        "cannot import name 'create_local_qdrant_store'",
        "out-of-scope: its knowledge base is 10xGraph's Qdrant store with OpenAI embeddings "
        "(long-term memory stores are outside tenxgraph; RAGAgent takes any store with asearch)",
    ),
    ("docs/how-to/python/use-prebuilt-tools.md", 0): (
        "cannot import name 'file_read'",
        "out-of-scope: imports every prebuilt tool, among them the file, calculator, Vertex AI "
        "search and memory tools tenxgraph does not provide (fetch_url, google_web_search and "
        "the handoff tools are provided)",
    ),
    ("docs/reference/python/stream-emitter.md", 10): (
        "unsupported operand type(s) for |: 'str' and 'str'",
        'fragment: a chunk\'s shape in pseudo-notation ("message" | "error" | ...)',
    ),
}
ALWAYS = ("docs/get-started/", "docs/tutorials/from-examples/stop-stream.md")
_BLOCK = re.compile(r"^```(?:python|py)[^\n]*\n(.*?)^```", re.S | re.M)
_IMPORT = re.compile(r"^(\s*)(from|import)(\s+)agentflow\b", re.M)

# runs one example file: top-level ``await`` is allowed (as in a notebook or ``python -m
# asyncio``); anything else is plain ``python file.py``
_RUNNER = """
import ast, asyncio, sys, types
path = sys.argv[1]
src = open(path).read()
code = compile(src, path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
main = types.ModuleType("__main__"); main.__file__ = path
sys.modules["__main__"] = main
if code.co_flags & 0x80:  # CO_COROUTINE: the example awaits at top level
    asyncio.run(eval(code, main.__dict__))
else:
    exec(code, main.__dict__)
"""


def _value(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> Any:
    """A plausible value for a JSON schema (tool arguments, structured answers)."""
    if depth > 6:
        return None
    if "$ref" in schema:
        return _value(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key) or () if o.get("type") != "null"]
        if options:
            return _value(options[0], defs, depth + 1)
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), "string")
    kind = str(kind or "").lower()  # Gemini's OpenAPI schemas spell types in capitals
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: _value(v, defs, depth + 1) for k, v in props.items()}
    if kind == "array":
        return [_value(schema.get("items") or {"type": "string"}, defs, depth + 1)]
    if kind == "integer":
        return 2
    if kind == "number":
        return 2.5
    if kind == "boolean":
        return True
    return "Paris"


def _auto(kind: str, path: str, body: dict[str, Any]) -> Answer:
    """The answer a server gives when nothing is scripted (see the module docstring)."""
    model = body.get("model") or path.split("/models/")[-1].split(":")[0]
    tools: list[tuple[str, dict[str, Any]]] = []
    schema: dict[str, Any] | None = None
    answered_tool = False
    if kind == "google":
        for group in body.get("tools") or ():
            for fn in group.get("functionDeclarations") or ():
                params = (
                    fn.get("parametersJsonSchema")
                    or fn.get("parameters_json_schema")
                    or fn.get("parameters")
                    or {}
                )
                tools.append((fn["name"], params))
        if any("googleSearch" in g or "google_search" in g for g in body.get("tools") or ()):
            # Google Search grounding: an answer with the sources it was grounded on
            return Answer(
                text=f"Local grounded answer from {model}.",
                grounding={
                    "webSearchQueries": ["local search"],
                    "groundingChunks": [{"web": {"uri": "https://example.com/", "title": "x"}}],
                },
            )
        last = (body.get("contents") or [{}])[-1]
        answered_tool = any("functionResponse" in p for p in last.get("parts") or ())
        gen = body.get("generationConfig") or body.get("generation_config") or {}
        schema = (
            gen.get("responseJsonSchema")
            or gen.get("response_json_schema")
            or gen.get("responseSchema")
            or gen.get("response_schema")
        )
    elif path.rstrip("/").endswith("/responses"):
        tools = [(t["name"], t.get("parameters") or {}) for t in body.get("tools") or ()]
        items = body.get("input") or [{}]
        answered_tool = isinstance(items, list) and items[-1].get("type") == "function_call_output"
        fmt = (body.get("text") or {}).get("format") or {}
        schema = fmt.get("schema")
    elif kind == "anthropic":
        tools = [(t["name"], t.get("input_schema") or {}) for t in body.get("tools") or ()]
        last = (body.get("messages") or [{}])[-1]
        content = last.get("content")
        answered_tool = isinstance(content, list) and any(
            b.get("type") == "tool_result" for b in content
        )
        schema = ((body.get("output_config") or {}).get("format") or {}).get("schema")
    else:  # OpenAI chat completions
        tools = [
            (t["function"]["name"], t["function"].get("parameters") or {})
            for t in body.get("tools") or ()
        ]
        last = (body.get("messages") or [{}])[-1]
        answered_tool = last.get("role") == "tool"
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema")
    if tools and not answered_tool:
        name, params = tools[0]
        args = _value(params, params.get("$defs") or {})
        return Answer(calls=[(name, args if isinstance(args, dict) else {})])
    if schema:
        import json

        return Answer(text=json.dumps(_value(schema, schema.get("$defs") or {})))
    return Answer(text=f"Local answer from {model}.")


@dataclass
class Example:
    page: str
    index: int
    code: str
    earlier: list[str]
    page_blocks: list[str]


def examples(repo: str, only: str | None) -> list[Example]:
    """The selected examples of the docs at ``repo`` (see the module docstring)."""
    names = subprocess.run(
        ["git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD", "docs"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    out: list[Example] = []
    for name in names:
        if not name.endswith((".md", ".mdx")) or (only and only not in name):
            continue
        text = subprocess.run(
            ["git", "-C", repo, "show", f"HEAD:{name}"], capture_output=True, text=True, check=True
        ).stdout
        blocks = _BLOCK.findall(text)
        always = name.startswith(ALWAYS)
        for i, block in enumerate(blocks):
            if always or any(p in block for p in PATTERNS):
                out.append(Example(name, i, block, blocks[:i], blocks))
    return out


def rename(code: str) -> str:
    """The one change made to an example: ``agentflow`` imports become ``tenxgraph``."""
    return _IMPORT.sub(r"\1\2\3tenxgraph", code)


def _expected(code: str) -> set[str]:
    want = set()
    if re.search(r"provider=[\"']google|gemini-", code):
        want.add("google")
    if re.search(r"provider=[\"']anthropic|claude-", code):
        want.add("anthropic")
    return want


class Harness:
    def __init__(self, timeout_s: float, verbose: bool) -> None:
        self.servers = {
            "google": GeminiServer(),
            "anthropic": AnthropicServer(),
            "openai": OpenAIServer(),
        }
        for kind, srv in self.servers.items():
            srv.auto = lambda path, body, kind=kind: _auto(kind, path, body)
        self.timeout_s = timeout_s
        self.verbose = verbose
        self.tmp = tempfile.mkdtemp(prefix="tenxgraph-doc-examples-")
        Path(self.tmp, "runner.py").write_text(_RUNNER)
        # files the pages read as the reader's own (media-and-files opens "chart.png")
        Path(self.tmp, "chart.png").write_bytes(_tiny_png())
        self.env = {
            **os.environ,
            "GOOGLE_GEMINI_BASE_URL": self.servers["google"].url,
            "GOOGLE_VERTEX_BASE_URL": self.servers["google"].url,
            "GOOGLE_API_KEY": "local-key",
            "GEMINI_API_KEY": "local-key",
            "ANTHROPIC_BASE_URL": self.servers["anthropic"].url,
            "ANTHROPIC_API_KEY": "local-key",
            "OPENAI_BASE_URL": self.servers["openai"].url + "/v1",
            "OPENAI_API_KEY": "local-key",
            "PYTHONPATH": str(ROOT),
        }
        self.env.pop("GOOGLE_GENAI_USE_VERTEXAI", None)

    def close(self) -> None:
        for srv in self.servers.values():
            srv.close()

    def _run(self, code: str) -> tuple[int | None, str, dict[str, int]]:
        before = {k: len(s.requests) for k, s in self.servers.items()}
        path = Path(self.tmp, "example.py")
        path.write_text(code)
        try:
            proc = subprocess.run(
                [sys.executable, str(Path(self.tmp, "runner.py")), str(path)],
                cwd=self.tmp,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                stdin=subprocess.DEVNULL,
            )
            rc, out = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc, out = (
                None,
                (exc.stdout or b"").decode(errors="replace")
                if isinstance(exc.stdout, bytes)
                else str(exc.stdout or ""),
            )
        calls = {k: len(s.requests) - before[k] for k, s in self.servers.items()}
        return rc, out, {k: v for k, v in calls.items() if v}

    def judge(self, ex: Example) -> tuple[str, str]:
        code = rename(ex.code)
        try:
            compile(code, ex.page, "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT
        except SyntaxError as exc:
            return "fragment", f"not a program (SyntaxError: {exc.msg}, line {exc.lineno})"
        rc, out, calls = self._run(code)
        how = ""
        missing = _missing_name(out) if rc else None
        if missing:
            # what the page shows elsewhere for each missing name: its import line, else the
            # latest earlier block defining it (pages build programs up step by step)
            added: list[str] = []
            rc2, out2, calls2, name = rc, out, calls, missing
            while name and len(added) < 8:
                part = _import_of(name, ex.page_blocks) or _definition_of(name, ex.earlier)
                if part is None or part in added:
                    break
                added.insert(0, part) if part.startswith(("import", "from")) else added.append(part)
                rc2, out2, calls2 = self._run("\n\n".join(added) + "\n\n" + code)
                name = _missing_name(out2) if rc2 else None
            if added and (rc2 == 0 or not name):
                rc, out, calls, missing = rc2, out2, calls2, None
                how = " (with what its page defines: " + str(len(added)) + " part(s))"
            elif name:
                missing = name  # the first name the page never defines
        if self.verbose:
            print(out[-3000:])
        if rc == 0:
            want = _expected(code)
            lacking = sorted(p for p in want if p not in calls)
            detail = ", ".join(f"{k}:{v}" for k, v in sorted(calls.items())) or "no model call"
            if lacking and not calls:
                detail += " (constructs only; the example never runs a graph)"
            elif lacking:
                return "FAIL", f"never reached {lacking}; requests {detail}"
            return "ok" + how, "requests " + detail
        if rc is None:
            return "FAIL", f"timeout after {self.timeout_s:.0f} s{how}"
        last = _last_error(out) + how
        mod = re.search(r"No module named '([\w.]+)'", out)
        if mod and not mod.group(1).startswith("tenxgraph"):
            return f"needs {mod.group(1).split('.')[0]}", last
        if missing:
            return "fragment", f"uses {missing!r}, defined neither in it nor on its page"
        if "ellipsis" in last:
            return "fragment", f"elides part of its code with '...' ({last})"
        known = KNOWN.get((ex.page, ex.index))
        if known and known[0] in out:
            verdict, _, why = known[1].partition(": ")
            return verdict, why
        return "FAIL", last


def _import_of(name: str, blocks: list[str]) -> str | None:
    """The page's import statement (renamed) that binds ``name`` at top level, if any."""
    for block in blocks:
        try:
            tree = ast.parse(rename(block))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if (alias.asname or alias.name.split(".")[0]) == name:
                        return ast.unparse(node)
    return None


def _definition_of(name: str, blocks: list[str]) -> str | None:
    """The latest of ``blocks`` (renamed) that assigns or defines ``name`` at top level."""
    pattern = re.compile(
        rf"^(?:{name}\s*(?::[^=]+)?=|(?:async\s+)?def\s+{name}\b|class\s+{name}\b)", re.M
    )
    for block in reversed(blocks):
        code = rename(block)
        if pattern.search(code) and _compiles(code):
            return code
    return None


def _compiles(code: str) -> bool:
    try:
        compile(code, "<block>", "exec", flags=0x2000)
    except SyntaxError:
        return False
    return True


def _missing_name(out: str) -> str | None:
    m = re.search(r"NameError: name '(\w+)' is not defined", out)
    return m.group(1) if m else None


def _last_error(out: str) -> str:
    lines = [ln for ln in out.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Exit)\b", ln) or ln.startswith("["):
            return ln[:200]
    return (lines[-1] if lines else "(no output)")[:200]


def main() -> int:
    """Run the examples and print the table; exit 1 when any example is ``FAIL``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("docs_repo", help="git directory of 10xGraph's documentation")
    parser.add_argument("--page", help="only pages whose path contains this text")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per example")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each output")
    args = parser.parse_args()
    chosen = examples(args.docs_repo, args.page)
    harness = Harness(args.timeout, args.verbose)
    counts: dict[str, int] = {}
    try:
        print(f"{'page':<55} {'ex':>3}  result")
        for ex in chosen:
            started = time.monotonic()
            result, detail = harness.judge(ex)
            key = result.split(" ")[0]
            counts[key] = counts.get(key, 0) + 1
            took = time.monotonic() - started
            print(
                f"{ex.page.removeprefix('docs/'):<55} {ex.index:>3}  {result}: {detail} [{took:.1f} s]"
            )
            sys.stdout.flush()
    finally:
        harness.close()
    print("summary: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 1 if counts.get("FAIL") else 0


if __name__ == "__main__":
    sys.exit(main())
