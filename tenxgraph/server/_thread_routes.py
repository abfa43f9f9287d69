"""The ``/v1/threads*`` routes (10xGraph's checkpointer router), scoped to the caller.

Every call passes the authenticated ``user_id``, so the store's user isolation decides: another
user's thread reads as not found (404) and writes to it are refused (403
``STORAGE_FORBIDDEN_001``), without revealing the owner.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tenxgraph.core.exceptions import ResourceNotFoundError

from ._body import check_id, parse_messages, read_model
from ._context import ServerContext
from ._envelope import ApiError, json_response
from ._thread_lease import thread_write_lease
from .schemas import ConfigBody, PutMessagesBody, PutStateBody

__all__ = ["ThreadRoutes"]


#: the largest offset / limit a list route takes: a store's BIGINT (int64)
INT64_MAX = 2**63 - 1


def _int_query(request: Request, name: str, minimum: int) -> int | None:
    """A paging query parameter: decimal digits only (optionally ``-``, refused below
    ``minimum``), at most :data:`INT64_MAX`; 422 before any store call otherwise."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    digits = raw[1:] if raw.startswith("-") else raw
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 19:
        raise ApiError(
            422, "VALIDATION_ERROR", f"{name} must be an integer from {minimum} to {INT64_MAX}"
        )
    value = int(raw)
    if value < minimum or value > INT64_MAX:
        raise ApiError(
            422, "VALIDATION_ERROR", f"{name} must be an integer from {minimum} to {INT64_MAX}"
        )
    return value


#: page size of the list routes when the query gives none, and the most they return (10xGraph's
#: reference: default 100, clamped to 1000)
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def _page(request: Request) -> tuple[int | None, int]:
    offset = _int_query(request, "offset", 0)
    limit = _int_query(request, "limit", 1)
    return offset, min(limit if limit is not None else DEFAULT_LIMIT, MAX_LIMIT)


def _not_found(thread_id: str) -> ResourceNotFoundError:
    return ResourceNotFoundError(
        f"no thread {thread_id!r} for this user", context={"thread_id": thread_id}
    )


class ThreadRoutes:
    """Handlers of the thread routes, bound to one :class:`ServerContext`."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    async def _cfg(self, request: Request, body: dict[str, Any] | None = None) -> dict[str, Any]:
        user = await self.ctx.user(request)
        return self.ctx.config(user, body, request.path_params["thread_id"])

    def _state_out(self, state: Any) -> dict[str, Any] | None:
        return None if state is None else state.model_dump(mode="json")

    async def get_state(self, request: Request) -> Response:
        """``GET /v1/threads/{id}/state``: ``{"state": ... | None}``."""
        cfg = await self._cfg(request)
        state = await self.ctx.graph.aget_state(cfg)
        return json_response(request, {"state": self._state_out(state)})

    async def put_state(self, request: Request) -> Response:
        """``PUT /v1/threads/{id}/state``: set fields (each through its reducer), a new version."""
        body = await read_model(request, PutStateBody, self.ctx.max_body_bytes)
        cfg = await self._cfg(request, body.config)
        if "execution_meta" in body.state:
            raise ApiError(422, "VALIDATION_000", "execution_meta is written by the runtime only")
        if isinstance(body.state.get("context"), list):
            # message dicts, as invoke's "messages" takes them
            body.state["context"] = parse_messages(body.state["context"], "context")
        async with thread_write_lease(self.ctx, cfg):
            await self.ctx.graph.aupdate_state(cfg, body.state)
        state = await self.ctx.graph.aget_state(cfg)
        return json_response(request, {"state": self._state_out(state), "updated": True})

    async def clear_state(self, request: Request) -> Response:
        """``DELETE /v1/threads/{id}/state``: clear the thread (10xGraph's ``aclear_state``);
        404 when there is nothing of it for this user."""
        body = await read_model(request, ConfigBody, self.ctx.max_body_bytes, optional=True)
        cfg = await self._cfg(request, body.config)
        async with thread_write_lease(self.ctx, cfg):
            res = await self.ctx.graph.checkpointer.aclear_state(cfg)
        if not res:
            raise _not_found(cfg["thread_id"])
        return json_response(
            request,
            {
                "success": True,
                "message": "State cleared successfully",
                "data": res,
                "deleted": True,
            },
        )

    async def put_messages(self, request: Request) -> Response:
        """``POST /v1/threads/{id}/messages``: append messages (``aput_messages``)."""
        body = await read_model(request, PutMessagesBody, self.ctx.max_body_bytes)
        if not body.messages:
            raise ApiError(422, "VALIDATION_ERROR", "messages must not be empty")
        for m in body.messages:
            check_id(m.message_id, "message_id")
        cfg = await self._cfg(request, body.config)
        async with thread_write_lease(self.ctx, cfg):
            await self.ctx.graph.checkpointer.aput_messages(cfg, body.messages, body.metadata)
        ids = [m.message_id for m in body.messages]
        return json_response(
            request, {"success": True, "message": "Messages put successfully", "data": ids}
        )

    async def list_messages(self, request: Request) -> Response:
        """``GET /v1/threads/{id}/messages?search=&offset=&limit=``: ``{"messages": [...]}``
        (``limit`` default 100, at most 1000)."""
        cfg = await self._cfg(request)
        offset, limit = _page(request)
        msgs = await self.ctx.graph.checkpointer.alist_messages(
            cfg, request.query_params.get("search") or None, offset, limit
        )
        return json_response(request, {"messages": msgs})

    async def get_message(self, request: Request) -> Response:
        """``GET /v1/threads/{id}/messages/{mid}``: the message (404 when absent)."""
        cfg = await self._cfg(request)
        mid = check_id(request.path_params["message_id"], "message_id")
        msg = await self.ctx.graph.checkpointer.aget_message(cfg, mid)
        return json_response(request, msg)

    async def delete_message(self, request: Request) -> Response:
        """``DELETE /v1/threads/{id}/messages/{mid}``: remove one message (404 when the
        thread, for this user, has no such message)."""
        body = await read_model(request, ConfigBody, self.ctx.max_body_bytes, optional=True)
        cfg = await self._cfg(request, body.config)
        mid = check_id(request.path_params["message_id"], "message_id")
        async with thread_write_lease(self.ctx, cfg):
            res = await self.ctx.graph.checkpointer.adelete_message(cfg, mid)
        if not res:
            raise ResourceNotFoundError(
                f"no message {mid!r} in thread {cfg['thread_id']!r}",
                context={"thread_id": cfg["thread_id"], "message_id": mid},
            )
        return json_response(
            request, {"success": True, "message": "Message deleted successfully", "data": res}
        )

    async def get_thread(self, request: Request) -> Response:
        """``GET /v1/threads/{id}``: ``{"thread": {...} | None}``; 404 when absent or foreign."""
        cfg = await self._cfg(request)
        info = await self.ctx.graph.checkpointer.aget_thread(cfg)
        if info is None:
            raise _not_found(cfg["thread_id"])
        info_out = info.model_dump()
        # "thread" as 10xGraph's server sends it, "thread_data" as its reference page shows
        return json_response(request, {"thread": info_out, "thread_data": info_out})

    async def list_threads(self, request: Request) -> Response:
        """``GET /v1/threads?search=&offset=&limit=``: the caller's threads, newest first
        (``limit`` default 100, at most 1000)."""
        user = await self.ctx.user(request)
        offset, limit = _page(request)
        infos = await self.ctx.graph.checkpointer.alist_threads(
            {"user_id": user["user_id"]}, request.query_params.get("search") or None, offset, limit
        )
        return json_response(request, {"threads": [i.model_dump() for i in infos]})

    async def delete_thread(self, request: Request) -> Response:
        """``DELETE /v1/threads/{id}``: delete every version, message and ledger row."""
        body = await read_model(request, ConfigBody, self.ctx.max_body_bytes, optional=True)
        cfg = await self._cfg(request, body.config)
        async with thread_write_lease(self.ctx, cfg):
            res = await self.ctx.graph.checkpointer.aclean_thread(cfg)
        if not res:
            raise _not_found(cfg["thread_id"])
        return json_response(
            request, {"success": True, "message": "Thread deleted successfully", "data": res}
        )
