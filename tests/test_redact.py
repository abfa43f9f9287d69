"""The one redaction routine masks every DSN and URL form and leaves the rest readable."""

from __future__ import annotations

import pytest

from tenxgraph._redact import redact, secret_candidates
from tenxgraph._url_check import url_problem


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
        ("postgresql://rv3:ab/cdXYZ@127.0.0.1:5488/rvdb", "postgresql://rv3:***@127.0.0.1:5488/rvdb"),
        ("postgresql://u:ab?cd#ef@db/app", "postgresql://u:***@db/app"),
        ("redis://:WrongRedis@/xx@127.0.0.1:7417/0", "redis://:***@127.0.0.1:7417/0"),
        ("host=db password=abc\\ def dbname=app", "host=db password=*** dbname=app"),
        ("host=db password=Secret1 Secret2word dbname=app", "host=db password=*** dbname=app"),
        ('host=db password="dq word" dbname=app', 'host=db password="***" dbname=app'),
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


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("postgresql://u:two wordsXY@h/db", {"two wordsXY", "wordsXY"}),
        ("host=h password=Secret1 Secret2word port=1", {"Secret1 Secret2word", "Secret1", "Secret2word"}),
        ('host=h password="dq wordXY" port=1', {"dq wordXY", "wordXY"}),
        ("host=h password=abc\\ defXY", {"abc\\ defXY", "abc defXY", "defXY"}),
        ("host=h password='open quote-pw", {"open quote-pw", "open", "quote-pw"}),
        ("postgresql://u:a%40bcd@h/db", {"a%40bcd", "a@bcd"}),
        ("host=h user=u", set()),
        (None, set()),
    ],
)  # fmt: skip
def test_secret_candidates_of_malformed_dsns(dsn: str | None, expected: set[str]) -> None:
    assert set(secret_candidates(dsn)) == expected


@pytest.mark.parametrize(
    ("url", "char"),
    [
        ("postgresql://rv3:ab/cdXYZ@127.0.0.1:5488/rvdb", "'/'"),
        ("postgresql://bob:p@ss@db/app", "'@'"),
        ("redis://:WrongRedis@/xx@127.0.0.1:7417/0", "'@'"),
        ("redis://:ab?cd@h:6379/0", "'?'"),
        ("redis://:ab#cd@h:6379/0", "'#'"),
        ("postgresql://u:two words@h/db", "a space"),
        ("postgresql://u:12/34@h/db", "'/'"),
        ("postgresql://u:pw@h/db", None),
        ("postgresql://h:5432/db?application_name=a@b", None),
        ("redis://127.0.0.1:6379/0", None),
        ("host=h password=a@b/c", None),
    ],
)
def test_url_problem(url: str, char: str | None) -> None:
    problem = url_problem(url)
    if char is None:
        assert problem is None
    else:
        assert problem is not None and char in problem
        assert "ab" not in problem.replace("about", "") and "cd" not in problem
