"""What every route handler shares: the graph, the authenticator and the limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from anyio.abc import TaskGroup
from starlette.requests import Request

from tenxgraph.core.graph.compiled_graph import CompiledGraph

from ._body import check_id
from ._envelope import ApiError
from .auth import BaseAuth, authenticate

__all__ = ["ServerContext"]


@dataclass
class ServerContext:
    """The served graph and the server's settings (one per app).

    Attributes:
        served: the compiled graph, or ``None`` until the app's lifespan loaded it (an app
            built from a config file loads its graph on the server's event loop).
        auth: the authenticator, or ``None`` (every caller is ``"anonymous"``).
        max_body_bytes: request bodies larger than this are refused with 413.
        default_strategy: the ``multitask_strategy`` of runs whose config and checkpointer
            name none.
        runs: the task group of streamed runs, opened by the app's lifespan (a run goes on
            when its client drops the connection); ``None`` outside the lifespan.
        recovery: options of the graph's recovery loop (``CompiledGraph.recovery``) run by
            the app's lifespan, so every API instance also runs submitted background runs
            and finishes cut-off ones; ``None``: no recovery loop.
    """

    served: CompiledGraph[Any] | None
    auth: BaseAuth | None
    max_body_bytes: int
    default_strategy: str | None
    runs: TaskGroup | None = None
    recovery: dict[str, Any] | None = None

    @property
    def graph(self) -> CompiledGraph[Any]:
        """The served graph.

        Raises:
            ApiError: 503 ``NOT_READY`` while the app has not finished starting.
        """
        if self.served is None:
            raise ApiError(503, "NOT_READY", "the server is still loading its graph")
        return self.served

    async def user(self, request: Request) -> dict[str, Any]:
        """The caller (dict with ``user_id``), cached on the request.

        Raises:
            ApiError: 403 when authentication fails; 422 ``VALIDATION_000`` when the
                subject is not a usable id (empty, over 255 characters, control characters).
        """
        cached = getattr(request.state, "user", None)
        if cached is not None:
            return dict(cached)
        user = await authenticate(self.auth, request)
        # a str by now (authenticate converts it), so never the store's ADMIN_SCOPE object
        check_id(user["user_id"], "user_id")
        request.state.user = user
        return dict(user)

    def config(
        self, user: dict[str, Any], config: dict[str, Any] | None, thread_id: Any = None
    ) -> dict[str, Any]:
        """A run / store config: the client's ``config`` with the caller's ``user_id``.

        The client cannot pick another ``user_id`` (it is always the authenticated one) nor
        the admin scope; ``thread_id`` from the path wins over the body's.

        Raises:
            ApiError: 422 ``VALIDATION_000`` for a bad thread id, 403 ``STORAGE_FORBIDDEN_001``
                when the body names another ``user_id``.
        """
        cfg = dict(config or {})
        claimed = cfg.pop("user_id", None)
        if claimed is not None and str(claimed) != user["user_id"]:
            raise ApiError(
                403, "STORAGE_FORBIDDEN_001", "config.user_id must be the authenticated user"
            )
        cfg.pop("user", None)
        if thread_id is not None:
            cfg["thread_id"] = check_id(thread_id, "thread_id")
        elif cfg.get("thread_id") is not None:
            cfg["thread_id"] = check_id(cfg["thread_id"], "thread_id")
        cfg["user_id"] = user["user_id"]
        return cfg

    def run_config(self, user: dict[str, Any], config: dict[str, Any] | None) -> dict[str, Any]:
        """:meth:`config` plus the server's default ``multitask_strategy`` when none is set."""
        cfg = self.config(user, config)
        if (
            "multitask_strategy" not in cfg
            and self.graph.checkpointer.multitask_strategy is None
            and self.default_strategy is not None
        ):
            cfg["multitask_strategy"] = self.default_strategy
        return cfg
