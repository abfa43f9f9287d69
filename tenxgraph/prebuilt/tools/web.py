"""Web tools: :func:`fetch_url` (an HTTP GET) and :func:`google_web_search` (Gemini grounding).

Both are plain async functions with typed parameters, so a ``ToolNode`` offers them to a model
as they are. Both return a JSON object as text (the shapes of 10xGraph's web-tools page).

``fetch_url`` refuses anything but ``http`` / ``https`` and, by default, any host resolving to
a private, loopback, link-local, reserved or multicast address (every redirect hop is checked
again), so a model cannot make the process read internal services. The name is resolved just
before connecting; a DNS answer that changes in between is not caught (the usual limit of
resolve-then-connect checks). :func:`make_fetch_url` builds a variant with other limits (for
example ``allow_private_hosts=True`` for a service on the same machine).
"""

from __future__ import annotations

import html
import ipaddress
import json
import os
import re
import socket
from collections.abc import Awaitable, Callable
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import anyio
import httpx

from tenxgraph.core.exceptions import ConfigError, ValidationError

__all__ = ["fetch_url", "google_web_search", "make_fetch_url"]

#: Seconds a fetch may take at least / at most (a model's ``timeout`` is clamped into it).
TIMEOUT_RANGE_S = (1.0, 30.0)
#: Bytes of a response body read at most; the rest is not downloaded.
MAX_BODY_BYTES = 2_000_000
#: Redirects followed at most (each target is checked like the first URL).
MAX_REDIRECTS = 5


class _Text(HTMLParser):
    """Collects the visible text of an HTML page (no script, style or head content)."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "head", "svg"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skipping += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skipping:
            self._skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def _visible_text(body: str, content_type: str) -> str:
    if "html" in content_type.lower() or body.lstrip()[:15].lower().startswith(
        ("<!doctype", "<html")
    ):
        parser = _Text()
        parser.feed(body)
        parser.close()
        body = " ".join(parser.parts)
    return re.sub(r"\s+", " ", html.unescape(body)).strip()


def _blocked(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return bool(
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


async def _check_url(url: str, allow_private_hosts: bool) -> None:
    """Raise ``ValidationError`` when ``url`` may not be fetched (module docstring)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise ValidationError(
            f"fetch_url takes an http:// or https:// URL, got scheme {parts.scheme or '(none)'!r}",
            context={"url": url, "reason": "scheme"},
        )
    host = parts.hostname
    if not host:
        raise ValidationError(
            "fetch_url: the URL names no host", context={"url": url, "reason": "host"}
        )
    if allow_private_hosts:
        return
    try:
        infos = await anyio.to_thread.run_sync(
            lambda: socket.getaddrinfo(host, parts.port or 0, proto=socket.IPPROTO_TCP)
        )
    except socket.gaierror as exc:
        raise ValidationError(
            f"fetch_url: cannot resolve host {host!r} ({exc.strerror})",
            context={"url": url, "reason": "dns"},
        ) from None
    for info in infos:
        address = str(info[4][0])
        if _blocked(address):
            raise ValidationError(
                f"fetch_url: host {host!r} resolves to the non-public address {address}; "
                "only public hosts are fetched",
                context={"url": url, "reason": "private_address", "address": address},
            )


def make_fetch_url(
    *,
    allow_private_hosts: bool = False,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_redirects: int = MAX_REDIRECTS,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Callable[..., Awaitable[str]]:
    """A ``fetch_url`` tool with other limits than the module's :func:`fetch_url`.

    Args:
        allow_private_hosts: also fetch hosts on private / loopback addresses (a service on
            the same machine or network); default ``False``.
        max_body_bytes: response bytes read at most (positive).
        max_redirects: redirects followed at most (0: none).
        transport: an ``httpx`` transport (proxies, custom TLS); default httpx's.

    Returns:
        An async tool ``fetch_url(url, timeout=10.0, max_chars=20000) -> str`` (see
        :func:`fetch_url`).

    Raises:
        ConfigError: ``CONFIG_001`` for a non-positive ``max_body_bytes`` or a negative
            ``max_redirects``.
    """
    if max_body_bytes <= 0 or max_redirects < 0:
        raise ConfigError(
            "make_fetch_url needs max_body_bytes > 0 and max_redirects >= 0",
            context={"max_body_bytes": max_body_bytes, "max_redirects": max_redirects},
        )

    async def fetch_url(url: str, timeout: float = 10.0, max_chars: int = 20000) -> str:  # noqa: ASYNC109 - the documented tool parameter the model sets
        """Fetch a public web page (HTTP GET) and return its readable text.

        Args:
            url: the http:// or https:// URL to fetch.
            timeout: seconds the request may take (clamped to 1-30).
            max_chars: characters of text returned at most.

        Returns:
            A JSON object: ``url`` (after redirects), ``status_code``, ``content_type``,
            ``content`` (visible text; HTML tags, scripts and styles removed) and ``truncated``;
            or ``url`` and ``error`` when the server could not be reached or answered too
            slowly.

        Raises:
            ValidationError: ``VALIDATION_000`` for a URL that is not http(s), names no host,
                does not resolve or resolves to a non-public address, or a ``max_chars`` < 1.
        """
        if not isinstance(url, str) or not url.strip():
            raise ValidationError("fetch_url needs a URL", context={"url": repr(url)})
        if int(max_chars) < 1:
            raise ValidationError(
                "fetch_url: max_chars must be at least 1", context={"max_chars": max_chars}
            )
        seconds = min(max(float(timeout), TIMEOUT_RANGE_S[0]), TIMEOUT_RANGE_S[1])
        current = url.strip()
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(seconds), follow_redirects=False, transport=transport
        ) as client:
            try:
                with anyio.fail_after(seconds):
                    for _ in range(max_redirects + 1):
                        await _check_url(current, allow_private_hosts)
                        async with client.stream("GET", current) as resp:
                            if resp.is_redirect and "location" in resp.headers:
                                current = urljoin(current, resp.headers["location"])
                                continue
                            raw = bytearray()
                            async for chunk in resp.aiter_bytes():
                                raw.extend(chunk)
                                if len(raw) >= max_body_bytes:
                                    break
                            too_big = len(raw) >= max_body_bytes
                            ctype = resp.headers.get("content-type", "")
                            text = bytes(raw[:max_body_bytes]).decode(
                                resp.encoding or "utf-8", errors="replace"
                            )
                            content = _visible_text(text, ctype)
                            cut = too_big or len(content) > int(max_chars)
                            return json.dumps(
                                {
                                    "url": str(resp.url),
                                    "status_code": resp.status_code,
                                    "content_type": ctype,
                                    "content": content[: int(max_chars)],
                                    "truncated": cut,
                                }
                            )
                    return json.dumps(
                        {"url": current, "error": f"more than {max_redirects} redirects"}
                    )
            except TimeoutError:
                return json.dumps({"url": current, "error": f"timed out after {seconds:g} s"})
            except httpx.TimeoutException:
                return json.dumps({"url": current, "error": f"timed out after {seconds:g} s"})
            except httpx.HTTPError as exc:
                return json.dumps(
                    {"url": current, "error": f"{type(exc).__name__}: {exc}".strip(": ")}
                )

    fetch_url.__tags__ = {"web", "fetch", "network"}  # type: ignore[attr-defined]
    return fetch_url


#: Fetch a public http(s) URL and return its text (see :func:`make_fetch_url` for the result).
fetch_url = make_fetch_url()


async def google_web_search(
    query: str, model: str = "gemini-2.5-flash", max_chars: int = 20000
) -> str:
    """Search the web through Gemini's Google Search grounding and return the grounded answer.

    One ``generateContent`` call with the ``google_search`` tool enabled, through the
    ``google-genai`` SDK (extra ``google``). The SDK reads its key (``GOOGLE_API_KEY`` /
    ``GEMINI_API_KEY``) and endpoint (``GOOGLE_GEMINI_BASE_URL``) from the environment, and
    ``GOOGLE_GENAI_USE_VERTEXAI`` to go through Vertex AI.

    Args:
        query: what to search for.
        model: the Gemini model answering (default ``"gemini-2.5-flash"``).
        max_chars: characters of the answer returned at most.

    Returns:
        A JSON object: ``content`` (the model's grounded answer), ``grounding_metadata`` (the
        search queries, sources and supports Gemini returned, ``null`` when it returned none)
        and ``truncated``.

    Raises:
        ValidationError: ``VALIDATION_000`` for an empty query or ``max_chars`` < 1.
        ModelError: ``MODEL_001`` when ``google-genai`` is not installed or no key is set;
            other ``MODEL_*`` errors as :class:`tenxgraph.models.google.GoogleModel` raises.
    """
    from tenxgraph.models.google import GoogleModel

    if not isinstance(query, str) or not query.strip():
        raise ValidationError("google_web_search needs a query", context={"query": repr(query)})
    if int(max_chars) < 1:
        raise ValidationError(
            "google_web_search: max_chars must be at least 1", context={"max_chars": max_chars}
        )
    use_vertex = os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in ("1", "true")
    text, grounding = await GoogleModel(model, use_vertex_ai=use_vertex).agrounded_search(query)
    return json.dumps(
        {
            "content": text[: int(max_chars)],
            "grounding_metadata": grounding,
            "truncated": len(text) > int(max_chars),
        }
    )


google_web_search.__tags__ = {"web", "search", "google"}  # type: ignore[attr-defined]
