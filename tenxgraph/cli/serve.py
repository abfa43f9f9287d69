"""``tenxgraph serve``: serve a config file's graph with 10xGraph's REST API (uvicorn).

The config path travels to uvicorn's worker processes in the ``TENXGRAPH_SERVE_CONFIG``
variable; each worker builds its app with :func:`app_factory` and loads the graph on its own
event loop (uvicorn's ``factory=True``).
"""

from __future__ import annotations

import argparse
import copy
import math
import os
from typing import Any

__all__ = ["CONFIG_ENV", "add_serve_parser", "app_factory", "cmd_serve"]

#: the environment variable naming the config file for :func:`app_factory`
CONFIG_ENV = "TENXGRAPH_SERVE_CONFIG"
_MAX_BODY_ENV = "TENXGRAPH_SERVE_MAX_BODY_BYTES"
_NO_RECOVERY_ENV = "TENXGRAPH_SERVE_NO_RECOVERY"


def add_serve_parser(sub: Any) -> None:
    """Add the ``serve`` subcommand to the CLI's subparsers."""
    s = sub.add_parser(
        "serve",
        help="serve a graph with 10xGraph's REST API",
        description="Serve the compiled graph named by a 10xGraph config file (10xgraph.json or "
        'agentflow.json: "agent": "module:attr", "env", "auth") over HTTP, with '
        "10xGraph's routes and envelopes (docs/how-to/serve.md).",
    )
    s.add_argument(
        "--config",
        default=None,
        help="the config file (default: ./10xgraph.json or ./agentflow.json)",
    )
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    s.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    s.add_argument(
        "--max-body-bytes",
        type=int,
        default=None,
        help="largest request body accepted, bytes (default 10 MiB)",
    )
    s.add_argument(
        "--graceful-timeout",
        type=float,
        default=30.0,
        help="seconds a SIGTERM waits for requests in flight, whose runs stop at their next "
        "node boundary, before cancelling them (default 30)",
    )
    s.add_argument(
        "--no-recovery",
        action="store_true",
        help="do not run the graph's recovery loop in the server processes (by default each "
        "one also runs submitted background runs and finishes cut-off ones; run "
        "'tenxgraph worker' instead)",
    )
    s.add_argument("--log-level", default="info", help="uvicorn log level (default info)")


def app_factory() -> Any:
    """The app of the config file named by ``TENXGRAPH_SERVE_CONFIG`` (uvicorn factory).

    Raises:
        ConfigError: ``CONFIG_001`` when the variable is unset or the config is bad.
    """
    from tenxgraph.appconfig import load_config
    from tenxgraph.core.exceptions import ConfigError
    from tenxgraph.server.app import DEFAULT_MAX_BODY_BYTES, app_from_config

    path = os.environ.get(CONFIG_ENV)
    if not path:
        raise ConfigError(f"{CONFIG_ENV} names no config file", context={"key": "config"})
    from tenxgraph.server._lifecycle import GracefulShutdown

    limit = int(os.environ.get(_MAX_BODY_ENV) or DEFAULT_MAX_BODY_BYTES)
    recovery = os.environ.get(_NO_RECOVERY_ENV) != "1"
    app = app_from_config(load_config(path), max_body_bytes=limit, recovery=recovery)
    # SIGTERM drains the process: docs/how-to/deploy-load-balancer.md
    return GracefulShutdown(app, lambda: app.state.tenxgraph.served)


def _log_config() -> dict[str, Any]:
    from uvicorn.config import LOGGING_CONFIG

    cfg = copy.deepcopy(LOGGING_CONFIG)
    cfg["loggers"]["tenxgraph"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return cfg


def cmd_serve(args: argparse.Namespace) -> int:
    """Run ``tenxgraph serve`` until interrupted; returns the exit code.

    Raises:
        ConfigError: ``CONFIG_001`` for a missing or bad config file (checked before uvicorn
            starts), or when the ``server`` extra is not installed.
    """
    from tenxgraph.appconfig import find_config, load_config
    from tenxgraph.core.exceptions import ConfigError

    try:
        import uvicorn
    except ImportError:
        raise ConfigError(
            "tenxgraph serve needs the server extra: pip install -e '.[server]' in the tenxgraph checkout",
            context={"key": "server"},
        ) from None
    path = args.config or str(find_config("."))
    config = load_config(path)
    if args.workers < 1:
        raise ConfigError("--workers must be at least 1", context={"key": "workers"})
    if args.graceful_timeout < 0:
        raise ConfigError(
            "--graceful-timeout must be >= 0 seconds", context={"key": "graceful_timeout"}
        )
    if args.max_body_bytes is not None and args.max_body_bytes < 1:
        raise ConfigError("--max-body-bytes must be at least 1", context={"key": "max_body_bytes"})
    os.environ[CONFIG_ENV] = str(config.path)
    if args.max_body_bytes is not None:
        os.environ[_MAX_BODY_ENV] = str(args.max_body_bytes)
    if args.no_recovery:
        os.environ[_NO_RECOVERY_ENV] = "1"
    app_factory()  # fail here, in the parent, on a bad auth setting
    uvicorn.run(
        "tenxgraph.cli.serve:app_factory",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
        log_config=_log_config(),
        lifespan="on",
        timeout_graceful_shutdown=math.ceil(args.graceful_timeout),
    )
    return 0
