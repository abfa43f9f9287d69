"""Run 27 failing connection setups and print, as JSON, everything a user could see of them.

Run as a script (``python _failing_setups.py PRIVATE_PORT REFUSED_PORT SCHEMA REDIS_PREFIX``) so the OpenTelemetry SDK
and logging can be installed for this process alone. For each case it collects: the text, repr
and context of every exception (from the constructor, ``setup()``, a first async read and a
write), every log record (formatted, with tracebacks), every span (name, attributes, events,
status), the ``repr`` of the checkpointer and its tiers, and the stdout/stderr of the CLI's
``setup`` and ``threads list`` on the same DSN. The test greps all of it for the passwords.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import sys
import traceback
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

GOOD_PG = os.environ.get("TENXGRAPH_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def cases(private_port: int, refused: int) -> list[dict[str, Any]]:
    """(name, PgCheckpointer kwargs, secrets that must never show)."""
    p, r = private_port, refused
    return [
        {"pg": "postgresql://nosuchrole:Role-pw-01@127.0.0.1:5432/test", "secrets": ["Role-pw-01"]},
        {"pg": "postgresql://postgres:Db-pw-02@127.0.0.1:5432/no_such_db", "secrets": ["Db-pw-02"]},
        {
            "pg": "host=127.0.0.1 port=5432 user=nosuchrole password='my secret words 03' dbname=test",
            "secrets": ["my secret words 03", "secret words", "words 03"],
        },
        {
            "pg": "postgresql://postgres:Pa@ss-word-04@127.0.0.1:5432/test",
            "secrets": ["Pa@ss-word-04", "ss-word-04"],
        },
        {
            "pg": "postgresql+asyncpg://nosuchrole:Alchemy-pw-05@127.0.0.1/test",
            "secrets": ["Alchemy-pw-05"],
        },
        {
            "pg": "postgresql://nosuchrole@127.0.0.1/test?password=Query-pw-06",
            "secrets": ["Query-pw-06"],
        },
        {"pg": "postgresql://u:Host-pw-07@no-such-host.invalid/test", "secrets": ["Host-pw-07"]},
        {"pg": f"postgresql://u:Refused-pw-08@127.0.0.1:{r}/test", "secrets": ["Refused-pw-08"]},
        {
            "pg": "host=127.0.0.1 user=nosuchrole password='it\\'s secret 09' dbname=test",
            "secrets": ["it's secret 09", "s secret 09", "secret 09"],
        },
        {"pg": f"postgresql://postgres:Wrong-pw-10@127.0.0.1:{p}/test", "secrets": ["Wrong-pw-10"]},
        {
            "pg": f"host=127.0.0.1 port={p} user=postgres dbname=test password='wrong words 11'",
            "secrets": ["wrong words 11", "words 11"],
        },
        {
            "pg": f"postgresql://postgres:Wr%40ng-pw-12@127.0.0.1:{p}/test",
            "secrets": ["Wr%40ng-pw-12", "Wr@ng-pw-12", "ng-pw-12"],
        },
        {
            "pg": "host=127.0.0.1 user=postgres password=Tls-pw-13 dbname=test sslmode=require",
            "secrets": ["Tls-pw-13"],
        },
        {"pg": "host=127.0.0.1 password='unterminated Bad-pw-14", "secrets": ["Bad-pw-14"]},
        {
            "pg": GOOD_PG,
            "redis": f"redis://:Redis-pw-15@127.0.0.1:{r}/0",
            "secrets": ["Redis-pw-15"],
        },
        {
            "pg": GOOD_PG,
            "redis": f"redis://user:Redis@pw-16@127.0.0.1:{r}/0",
            "secrets": ["Redis@pw-16", "pw-16"],
        },
        {
            "pg": GOOD_PG,
            "redis": "redis://default:Wrong-redis-17@127.0.0.1:6379/0",
            "secrets": ["Wrong-redis-17"],
        },
        {
            "pg": GOOD_PG,
            "redis": "rediss://:Tls-redis-18@127.0.0.1:6379/0",
            "secrets": ["Tls-redis-18"],
        },
        {
            "pg": "postgresql://nosuchrole:Both-pw-19@127.0.0.1/test",
            "redis": f"redis://:Both-redis-19@127.0.0.1:{r}/0",
            "secrets": ["Both-pw-19", "Both-redis-19"],
        },
        {
            "pool": f"host=127.0.0.1 port={p} user=postgres dbname=test password='Pool pw 20'",
            "secrets": ["Pool pw 20", "pw 20"],
        },
        # a '/' in a URL password: libpq would read host 'rv3', port 'ab' (refused up front)
        {
            "pg": f"postgresql://rv3:ab/cdXYZ-21@127.0.0.1:{p}/rvdb",
            "secrets": ["ab/cdXYZ-21", "cdXYZ-21"],
        },
        # a space in a URL password: psycopg's parse error quotes it
        {
            "pg": f"postgresql://postgres:two wordsXY-22@127.0.0.1:{p}/test",
            "secrets": ["two wordsXY-22", "wordsXY-22"],
        },
        # an unquoted space in a key/value password: libpq's error quotes the second word
        {
            "pg": f"host=127.0.0.1 port={p} user=postgres dbname=test password=Secret1-23 Secret2word-23",
            "secrets": ["Secret1-23", "Secret2word-23"],
        },
        # double quotes are no quoting characters for libpq: its error quotes 'word-24"'
        {
            "pg": f'host=127.0.0.1 port={p} user=postgres dbname=test password="dq word-24"',
            "secrets": ["dq word-24", "word-24"],
        },
        # a backslash-escaped space: libpq reads 'abc def-25' (a wrong password)
        {
            "pg": f"host=127.0.0.1 port={p} user=postgres dbname=test password=abc\\ def-25",
            "secrets": ["abc def-25", "def-25"],
        },
        # a '?' in a URL password
        {
            "pg": f"postgresql://postgres:ab?cd-26@127.0.0.1:{p}/test",
            "secrets": ["ab?cd-26", "cd-26"],
        },
        # '@' and '/' in a Redis password: redis-py would silently use localhost:6379
        {
            "pg": GOOD_PG,
            "redis": f"redis://:WrongRedis-27@/xx@127.0.0.1:{r}/0",
            "secrets": ["WrongRedis-27"],
        },
    ]


def _exc_text(exc: BaseException) -> str:
    parts = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    parts.append(json.dumps(getattr(exc, "context", {}), default=str))
    return "\n".join(parts)


def run_case(
    case: dict[str, Any], exporter: InMemorySpanExporter, schema: str, prefix: str
) -> dict[str, Any]:
    from tenxgraph.cli import main as cli_main
    from tenxgraph.core.state import AgentState
    from tenxgraph.storage.checkpointer import PgCheckpointer

    seen: list[str] = []
    records: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Grab(level=logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    exporter.clear()
    try:
        pool = None
        try:
            if "pool" in case:
                from psycopg_pool import AsyncConnectionPool

                pool = AsyncConnectionPool(case["pool"], open=False, timeout=1)
                cp = PgCheckpointer(pg_pool=pool, pool_config={"timeout": 1}, schema=schema)
            else:
                cp = PgCheckpointer(
                    case["pg"], redis_url=case.get("redis"), pool_config={"timeout": 1},
                    schema=schema, redis_prefix=prefix,
                )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - what the user sees is collected
            seen.append(_exc_text(exc))
            cp = None
        if cp is not None:
            seen += [repr(cp), repr(cp.store), repr(getattr(cp.store, "source", None))]
            seen += [repr(c) for c in getattr(cp.store, "caches", [])]
            try:
                cp.setup()
            except Exception as exc:  # noqa: BLE001
                seen.append(_exc_text(exc))

            async def use() -> None:
                for call in (
                    lambda: cp.aget_state({"thread_id": "t"}),
                    lambda: cp.aput_state({"thread_id": "t"}, AgentState()),
                ):
                    try:
                        await call()
                    except Exception as exc:  # noqa: BLE001
                        seen.append(_exc_text(exc))
                await cp.aclose()

            asyncio.run(use())
        dsn = case.get("pg") or case.get("pool")
        for argv in (["setup", "--dsn", dsn], ["threads", "list", "--dsn", dsn]):
            argv += ["--schema", schema, "--redis-prefix", prefix]
            if case.get("redis"):
                argv += ["--redis-url", case["redis"]]
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = cli_main([*argv, "--timeout", "1"])
                except SystemExit as stop:
                    code = stop.code
            seen.append(f"exit {code}\n{out.getvalue()}\n{err.getvalue()}")
    finally:
        root.removeHandler(handler)
    spans = []
    for sp in exporter.get_finished_spans():
        spans.append(
            json.dumps(
                {
                    "name": sp.name,
                    "attributes": dict(sp.attributes or {}),
                    "events": [(e.name, dict(e.attributes or {})) for e in sp.events],
                    "status": sp.status.description,
                },
                default=str,
            )
        )
    return {"seen": seen, "logs": records, "spans": spans, "secrets": case["secrets"]}


def main() -> None:
    private_port, refused = int(sys.argv[1]), int(sys.argv[2])
    schema, prefix = sys.argv[3], sys.argv[4]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    logging.getLogger().setLevel(logging.DEBUG)
    results = [run_case(case, exporter, schema, prefix) for case in cases(private_port, refused)]
    print(json.dumps(results))


if __name__ == "__main__":
    main()
