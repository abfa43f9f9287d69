"""The one redaction routine masks every DSN and URL form and leaves the rest readable."""

from __future__ import annotations

import pytest

from tenxgraph._redact import redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgresql://bob:s3cret@db:5432/app", "postgresql://bob:***@db:5432/app"),
        ("postgresql://bob:p@ss@db/app", "postgresql://bob:***@db/app"),  # unencoded '@'
        ("postgresql://bob:a/b@c@db/app?x=1", "postgresql://bob:***@db/app?x=1"),
        ("postgresql://bob:s3cr%40t@db/app", "postgresql://bob:***@db/app"),
        ("postgresql+asyncpg://bob:pw12@db/app", "postgresql+asyncpg://bob:***@db/app"),
        ("redis://:pw12@h:6379/0", "redis://:***@h:6379/0"),
        ("postgresql://bob@db/app", "postgresql://bob@db/app"),  # no password: unchanged
        ("postgresql://bob@db/app?password=zz&sslmode=require",
         "postgresql://bob@db/app?password=***&sslmode=require"),
        ("host=db user=bob password='two words' dbname=app",
         "host=db user=bob password='***' dbname=app"),
        ("host=db password='it\\'s here' dbname=app", "host=db password='***' dbname=app"),
        ("host=db password=plain dbname=app", "host=db password=*** dbname=app"),
        ("host=db password = spaced", "host=db password = ***"),
        ("https://api.example/v1?api_key=k123&q=1", "https://api.example/v1?api_key=***&q=1"),
        ('FATAL: password authentication failed for user "bob"',
         'FATAL: password authentication failed for user "bob"'),
    ],
)  # fmt: skip
def test_forms(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_repr_of_a_dsn_with_both_quote_kinds() -> None:
    shown = redact(repr("host=h password='a b\"c' x"))
    assert "a b" not in shown and "c'" not in shown


def test_known_secrets_are_masked_anywhere() -> None:
    assert redact("server said: wrong value Hunter22!", ["Hunter22!"]) == (
        "server said: wrong value ***"
    )
    assert redact("abc", ["ab", None]) == "abc"  # too short to search for
