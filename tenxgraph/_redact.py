"""One routine that masks secrets in DSNs, URLs and any text quoting them.

Every place that may show a connection string, or a driver message that quotes one (errors,
log records, span attributes, ``repr`` of stores and checkpointers, the CLI), passes it through
``redact``. It understands:

* URLs with credentials, ``scheme://user:password@host/...``, also when the password holds
  unencoded reserved characters (``@``, ``/``, ``:``): everything between the first ``:`` of the
  user-info and the LAST ``@`` before the query string is masked;
* ``key=value`` pairs of a libpq DSN or a URL query string whose key names a secret
  (``password``, ``sslpassword``, ``passwd``, ``pwd``, ``pass``, ``secret``, ``token``,
  ``api_key`` ...), with the value unquoted, single-quoted (libpq's form, backslash escapes
  included) or double-quoted;
* known secret values passed by the caller (``secrets=``), masked wherever they appear, for
  messages that quote a password out of any recognisable context.

This module has no imports from the package, so every layer can use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MASK", "MIN_SECRET_LEN", "redact"]

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
    r"(?P<value>\\'(?:[^\\]|\\[^'])*(?:\\')?|'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[^\s&]+)",
    re.IGNORECASE,
)


def _mask_url(match: re.Match[str]) -> str:
    scheme, rest = match.group("scheme"), match.group("rest")
    # The authority ends at the query or fragment; a password may hold '/' or '@' unencoded,
    # so the user-info is everything up to the LAST '@' before '?' or '#'.
    cut = len(rest)
    for sep in "?#":
        pos = rest.find(sep)
        if pos != -1:
            cut = min(cut, pos)
    at = rest.rfind("@", 0, cut)
    if at == -1:
        return scheme + rest
    userinfo = rest[:at]
    colon = userinfo.find(":")
    if colon == -1:
        return scheme + rest  # user name only, no password
    return f"{scheme}{userinfo[: colon + 1]}{MASK}{rest[at:]}"


def _mask_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if value[:2] == "\\'":
        return f"{match.group('pre')}\\'{MASK}\\'"
    if value[:1] in ("'", '"'):
        return f"{match.group('pre')}{value[0]}{MASK}{value[0]}"
    return f"{match.group('pre')}{MASK}"


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
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LEN}, key=len, reverse=True):
        out = out.replace(secret, MASK)
    out = _URL.sub(_mask_url, out)
    return _KEY_VALUE.sub(_mask_value, out)
