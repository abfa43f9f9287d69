"""One routine that masks secrets in DSNs, URLs and any text quoting them.

Every place that may show a connection string, or a driver message that quotes one (errors,
log records, span attributes, ``repr`` of stores and checkpointers, the CLI), passes it through
``redact``. It understands:

* URLs with credentials, ``scheme://user:password@host/...``, also when the password holds
  unencoded reserved characters (``@``, ``/``, ``?``, ``#``, ``:``): everything between the
  first ``:`` of the user-info and the LAST ``@`` of the URL is masked;
* ``key=value`` pairs of a libpq DSN or a URL query string whose key names a secret
  (``password``, ``sslpassword``, ``passwd``, ``pwd``, ``pass``, ``secret``, ``token``,
  ``api_key`` ...), with the value unquoted, single-quoted (libpq's form, backslash escapes
  included) or double-quoted; an unquoted value right after ``=`` (no space between) runs on
  over the following words that are not ``key=`` pairs (``password=two words host=h``: libpq refuses it, but its
  message must not show ``words``);
* known secret values passed by the caller (``secrets=``), masked wherever they appear, for
  messages that quote a password out of any recognisable context.

This module has no imports from the package, so every layer can use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

__all__ = ["MASK", "MIN_SECRET_LEN", "redact", "secret_candidates"]

#: What a masked secret reads as.
MASK = "***"

#: Known secret values shorter than this many characters are not searched for in free text
#: (masking every ``"ab"`` would destroy the message); the structural patterns still apply.
MIN_SECRET_LEN = 4

# scheme://<userinfo>@host...: the token runs to the first whitespace or quote character.
_URL = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<rest>[^\s'\"<>`]*)")

_SECRET_KEYS = (
    r"(?:ssl)?password|passwd|pwd|pass|passphrase|secret|client_secret|"
    r"api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token"
)
_KEY_VALUE = re.compile(
    rf"(?P<pre>(?<![A-Za-z0-9_])(?:{_SECRET_KEYS})\s*[=:]\s*)"
    r"(?P<value>\\'(?:[^\\]|\\[^'])*(?:\\')?|'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?"
    r"|(?:\\.|[^\s&\\])+)(?P<more>(?:[ \t]+(?![A-Za-z_][A-Za-z0-9_]*\s*=)(?:\\.|[^\s&=\\])+)*)",
    re.IGNORECASE,
)


def _mask_url(match: re.Match[str]) -> str:
    scheme, rest = match.group("scheme"), match.group("rest")
    # A password may hold '/', '?', '#' or '@' unencoded (libpq reads 'u:ab?cd@h' as password
    # 'ab?cd'), so the user-info is everything up to the LAST '@' of the token: masking too
    # much of a malformed URL is better than showing part of its password.
    at = rest.rfind("@")
    if at == -1:
        return scheme + rest
    userinfo = rest[:at]
    colon = userinfo.find(":")
    if colon == -1 or "/" in userinfo[:colon]:
        return scheme + rest  # user name only, no password (or an '@' in the path only)
    return f"{scheme}{userinfo[: colon + 1]}{MASK}{rest[at:]}"


def _mask_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if value[:2] == "\\'":
        return f"{match.group('pre')}\\'{MASK}\\'{match.group('more')}"
    if value[:1] in ("'", '"'):
        return f"{match.group('pre')}{value[0]}{MASK}{value[0]}{match.group('more')}"
    # 'password=two words host=h' (libpq's own grammar, no space after '='): the words up to
    # the next key are part of the value; in prose ('api_key= or ...') only the first one is.
    more = match.group("more")
    if match.group("pre").endswith("=") and not match.group("pre")[-2:-1].isspace():
        more = ""
    return f"{match.group('pre')}{MASK}{more}"


def redact(text: object, secrets: Iterable[str | None] = ()) -> str:
    """Return ``str(text)`` with every password or token it holds replaced by ``***``.

    Args:
        text: any object: a DSN (``postgresql://u:pw@h/db``, ``host=h password='a b'``), a URL
            (``redis://:pw@h:6379/0``, ``https://h/v1?api_key=k``), or a message quoting one.
        secrets: secret values known to the caller (e.g. the password parsed from its DSN),
            masked wherever they appear; ``None`` and values shorter than
            ``MIN_SECRET_LEN`` characters are skipped.

    Returns:
        The text with each secret masked; the rest (user, host, port, database) unchanged, so
        the message still says which connection failed.

    Example:
        >>> redact("postgresql://bob:p@ss@db.local/app")
        'postgresql://bob:***@db.local/app'
        >>> redact("host=db user=bob password='two words'")
        "host=db user=bob password='***'"
    """
    out = str(text)
    for secret in sorted(
        {s for s in secrets if s and len(s) >= MIN_SECRET_LEN}, key=len, reverse=True
    ):
        out = out.replace(secret, MASK)
    out = _URL.sub(_mask_url, out)
    return _KEY_VALUE.sub(_mask_value, out)


_URL_START = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.\-]*://")
_SECRET_KEY_EQ = re.compile(rf"(?<![A-Za-z0-9_])(?:{_SECRET_KEYS})\s*=\s*", re.IGNORECASE)
_NEXT_KEY = re.compile(r"\s+[A-Za-z_][A-Za-z0-9_]*\s*=")
_PIECES = re.compile(r"[\s/?#@&'\"\\]+")


def _quoted(text: str, start: int, quote: str) -> str:
    """The value opened by ``quote`` at ``start`` up to its closing quote (or the end)."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\" and quote == "'":
            i += 2
            continue
        if text[i] == quote:
            return text[start + 1 : i]
        i += 1
    return text[start + 1 :]


def secret_candidates(dsn: str | None) -> list[str]:
    """Every string of a DSN or URL that may be (part of) a password, even when malformed.

    Used to mask driver messages about a DSN that cannot be parsed, which may quote any
    fragment of it (``missing "=" after "word"``, ``unexpected spaces found in "two words"``).

    Args:
        dsn: a libpq DSN (``key=value`` pairs) or a URL (``postgresql://``, ``redis://``),
            well-formed or not; ``None`` gives no candidates.

    Returns:
        The password as written, unescaped and percent-decoded, and each of its pieces split
        at spaces, quotes, backslashes and URL delimiters; only strings of at least
        ``MIN_SECRET_LEN`` characters.

    Example:
        >>> secret_candidates("host=h password=two wordsXY")
        ['two wordsXY', 'wordsXY']
    """
    if not dsn:
        return []
    found: list[str] = []
    m = _URL_START.match(dsn)
    if m:
        rest = dsn[m.end() :]
        at = rest.rfind("@")
        userinfo = rest[:at] if at != -1 else ""
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    for key in _SECRET_KEY_EQ.finditer(dsn):
        start = key.end()
        if start < len(dsn) and dsn[start] in "'\"":
            found.append(_quoted(dsn, start, dsn[start]))
            continue
        nxt = _NEXT_KEY.search(dsn, start)
        end = nxt.start() if nxt else len(dsn)
        found.append(dsn[start:end].split("&", 1)[0].rstrip())
    out: list[str] = []
    for value in found:
        for variant in (value, re.sub(r"\\(.)", r"\1", value), unquote(value)):
            out.append(variant.strip())
            out.extend(_PIECES.split(variant))
    return sorted({s for s in out if len(s) >= MIN_SECRET_LEN}, key=lambda s: (-len(s), s))
