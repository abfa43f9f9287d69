"""Refuse connection URLs whose user-info cannot be split from the host unambiguously.

A password with an unencoded ``@``, ``/``, ``?``, ``#`` or space is read differently by each
parser: libpq splits ``postgresql://rv3:ab/cd@h/db`` into host ``rv3``, port ``ab`` and database
``cd@h/db`` (then sends the password's first half to the DNS as a host name), and redis-py reads
``redis://:pw@/x@h:7417/0`` as "no host" and silently uses ``localhost:6379``. Neither can be
fixed by guessing, so ``PostgresStore`` and ``RedisCache`` refuse such URLs up front with a
``ConfigError`` naming the character to percent-encode, never quoting the URL itself.

This module has no imports from the package, so every layer can use it.
"""

from __future__ import annotations

import re

__all__ = ["url_problem"]

_SCHEME = re.compile(r"\s*(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")

#: How each character must be written inside a user name or password.
_ENCODED = {"@": "%40", "/": "%2F", "?": "%3F", "#": "%23", " ": "%20"}


def url_problem(url: str) -> str | None:
    """Why ``url``'s user-info (``user:password@``) cannot be parsed unambiguously, if it can't.

    The rules: no whitespace anywhere in a URL; at most one ``@`` before the host; no ``@`` in
    the path (a ``/`` in a password ends the host part early, so the real ``@`` lands there);
    no ``@`` in the query or fragment when the part before it already holds one, or holds a
    ``:`` not followed by a port number (a ``?`` or ``#`` inside a password).

    Args:
        url: a connection string; strings that are not URLs (libpq ``key=value`` DSNs) have
            no problem here.

    Returns:
        ``None`` when the URL is unambiguous (or not a URL), else a sentence naming the
        offending character and its percent-encoded form, without quoting the URL.

    Example:
        >>> url_problem("postgresql://bob@db/app") is None
        True
        >>> "'/' as %2F" in url_problem("postgresql://bob:a/b@db/app")
        True
    """
    m = _SCHEME.match(url)
    if not m:
        return None
    rest = url[m.end() :].rstrip()
    if re.search(r"\s", rest):
        return _sentence(" ")
    auth_end = len(rest)
    for sep in "/?#":
        pos = rest.find(sep)
        if pos != -1:
            auth_end = min(auth_end, pos)
    authority, tail = rest[:auth_end], rest[auth_end:]
    if authority.count("@") > 1:
        return _sentence("@")
    path_end = len(tail)
    for sep in "?#":
        pos = tail.find(sep)
        if pos != -1:
            path_end = min(path_end, pos)
    path, query = tail[:path_end], tail[path_end:]
    if "@" in path:
        return _sentence(rest[auth_end] if "@" not in authority else "@")
    if "@" in query:
        if "@" in authority:
            return _sentence("@")
        colon = authority.find(":")
        if colon != -1 and not authority[colon + 1 :].isdigit():
            return _sentence(rest[auth_end])
    return None


def _sentence(char: str) -> str:
    shown = "a space" if char == " " else f"an unencoded {char!r}"
    return (
        f"the URL's user name or password holds {shown} (or another reserved character), so "
        "where the host begins is ambiguous: percent-encode it in the user name and password "
        f"({', '.join(f'{c!r} as {e}' for c, e in _ENCODED.items())})"
    )
