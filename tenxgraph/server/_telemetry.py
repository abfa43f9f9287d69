"""A SERVER span per HTTP request (OpenTelemetry HTTP semantic conventions), parent of the
run span; a W3C ``traceparent`` header sent by the client is honoured (the span joins its trace).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from opentelemetry import propagate, trace

__all__ = ["TracingMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_tracer = trace.get_tracer("tenxgraph.server")


class TracingMiddleware:
    """ASGI middleware: one span ``"{method} {route}"`` of kind SERVER per HTTP request.

    Attributes set: ``http.request.method``, ``url.path``, ``url.scheme``,
    ``http.response.status_code``, ``http.route`` (the route template, when one matched),
    ``error.type`` on 5xx. Ids in paths never become span names (the template does).

    Args:
        app: the wrapped ASGI app.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        parent = propagate.extract(carrier)
        method = scope.get("method", "GET")
        with _tracer.start_as_current_span(
            method,
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes={
                "http.request.method": method,
                "url.path": scope.get("path", ""),
                "url.scheme": scope.get("scheme", "http"),
            },
        ) as span:
            status: dict[str, int] = {}

            async def send_wrapper(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status["code"] = int(message["status"])
                    span.set_attribute("http.response.status_code", status["code"])
                    if status["code"] >= 500:
                        span.set_attribute("error.type", str(status["code"]))
                        span.set_status(trace.StatusCode.ERROR)
                await send(message)

            try:
                await self.app(scope, receive, send_wrapper)
            finally:
                route = scope.get("route")
                template = getattr(route, "path", None)
                if template:
                    span.set_attribute("http.route", template)
                    span.update_name(f"{method} {template}")
