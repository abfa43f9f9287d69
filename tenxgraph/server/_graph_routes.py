"""The ``/v1/graph*`` routes: invoke, stream, stop, the graph's description, schema and tools."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tenxgraph.core.graph.tool_node import ToolNode

from ._body import check_id, read_model
from ._context import ServerContext
from ._envelope import ApiError, json_response
from ._stream import parse_cursor, stream_ndjson
from .schemas import GraphInputBody, StopBody

__all__ = ["ALREADY_PROCESSED_HEADER", "GraphRoutes"]

#: response header of an invoke answered from an earlier run (docs/idempotent-turns.md)
ALREADY_PROCESSED_HEADER = "X-Tenxgraph-Already-Processed"

#: 10xGraph's stream headers (no buffering by proxies, no compression)
_STREAM_HEADERS = {
    "Cache-Control": "no-cache, no-transform",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
    "Content-Encoding": "identity",
}


class GraphRoutes:
    """Handlers of the graph routes, bound to one :class:`ServerContext`."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    async def _run_args(
        self, request: Request
    ) -> tuple[GraphInputBody, dict[str, Any], dict[str, Any]]:
        user = await self.ctx.user(request)
        body = await read_model(request, GraphInputBody, self.ctx.max_body_bytes)
        for m in body.messages:
            check_id(m.message_id, "message_id")
        cfg = self.ctx.run_config(user, body.config)
        cfg["recursion_limit"] = body.recursion_limit
        data: dict[str, Any] = {"messages": list(body.messages)}
        if body.initial_state:
            data["state"] = dict(body.initial_state)
        return body, cfg, data

    async def invoke(self, request: Request) -> Response:
        """``POST /v1/graph/invoke``: run the turn, answer 10xGraph's invoke output."""
        body, cfg, data = await self._run_args(request)
        is_new = not cfg.get("thread_id")
        result = await self.ctx.graph.ainvoke(data, cfg, body.response_granularity)
        out = {
            "messages": result.get("messages", []),
            "state": result.get("state"),
            "context": result.get("context"),
            "summary": result.get("summary"),
            "meta": {
                "is_new_thread": is_new,
                "thread_id": cfg.get("thread_id"),
                "run_id": cfg.get("run_id"),
                "already_processed": bool(result.get("already_processed")),
                **({"interrupted": True} if result.get("interrupted") else {}),
            },
        }
        headers = {ALREADY_PROCESSED_HEADER: "true"} if result.get("already_processed") else None
        return json_response(request, out, headers=headers)

    async def stream(self, request: Request) -> Response:
        """``POST /v1/graph/stream``: NDJSON chunks; ``Last-Event-ID`` resumes (see _stream)."""
        cursor = parse_cursor(request.headers.get("last-event-id"))
        body, cfg, data = await self._run_args(request)
        if cursor is not None and not cfg.get("thread_id"):
            raise ApiError(422, "VALIDATION_000", "resuming a stream needs config.thread_id")
        lines = await stream_ndjson(
            self.ctx.graph,
            data,
            cfg,
            body.response_granularity,
            cursor,
            list(body.messages),
            self.ctx.runs,
        )
        return StreamingResponse(lines, media_type="text/event-stream", headers=_STREAM_HEADERS)

    async def stop(self, request: Request) -> Response:
        """``POST /v1/graph/stop``: ask the thread's run to stop at its next node boundary."""
        user = await self.ctx.user(request)
        body = await read_model(request, StopBody, self.ctx.max_body_bytes)
        cfg = self.ctx.config(user, body.config, body.thread_id.strip())
        result = await self.ctx.graph.astop(cfg)
        return json_response(request, {**result, "thread_id": cfg["thread_id"]})

    async def details(self, request: Request) -> Response:
        """``GET /v1/graph``: nodes, edges and ``info`` as 10xGraph's ``GraphSchema``."""
        await self.ctx.user(request)
        g = self.ctx.graph
        b = g.builder
        nodes = [{"id": "__start__", "name": "__start__"}]
        nodes += [{"id": n, "name": n} for n in b.nodes]
        nodes.append({"id": "__end__", "name": "__end__"})
        edges: list[dict[str, str]] = []
        if b.entry_point is not None:
            edges.append(
                {
                    "id": f"__start__->{b.entry_point}",
                    "source": "__start__",
                    "target": b.entry_point,
                }
            )
        for frm, to in b.edges.items():
            edges.append({"id": f"{frm}->{to}", "source": frm, "target": to})
        for frm, cond in b.conditional_edges.items():
            for to in sorted(set((cond.path_map or {}).values())):
                edges.append({"id": f"{frm}->{to}", "source": frm, "target": to})
        cp = g.checkpointer
        info = {
            "node_count": len(nodes),
            "edge_count": len(edges),
            "checkpointer": True,
            "checkpointer_type": type(cp).__name__,
            "publisher": g.publisher is not None,
            "store": False,
            "interrupt_before": sorted(g.interrupt_before),
            "interrupt_after": sorted(g.interrupt_after),
            "context_type": None,
            "id_generator": type(g.id_generator).__name__ if g.id_generator else None,
            "id_type": None,
            "state_type": g.state_class.__name__,
            "state_fields": list(g.state_class.model_fields),
        }
        return json_response(request, {"info": info, "nodes": nodes, "edges": edges})

    async def state_schema(self, request: Request) -> Response:
        """``GET /v1/graph:StateSchema``: the state class's JSON schema."""
        await self.ctx.user(request)
        return json_response(request, self.ctx.graph.state_class.model_json_schema())

    async def tools(self, request: Request) -> Response:
        """``GET /v1/graph/tools``: the OpenAI-style schemas of every ``ToolNode``'s tools."""
        await self.ctx.user(request)
        tools: list[dict[str, Any]] = []
        for node in self.ctx.graph.builder.nodes.values():
            if isinstance(node.func, ToolNode):
                tools.extend(node.func.tool_schemas())
        return json_response(request, {"tools": tools})
