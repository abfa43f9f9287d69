"""tenxgraph's HTTP server: 10xGraph's REST API over one compiled graph.

``create_app(graph, ...)`` builds the ASGI app (Starlette); ``tenxgraph serve --config
10xgraph.json`` serves it with uvicorn. Sits above ``core`` and ``storage``; nothing below
imports it. Needs the ``server`` extra (``pip install 'tenxgraph[server]'``).
"""

from tenxgraph.server.app import DEFAULT_MAX_BODY_BYTES, create_app
from tenxgraph.server.auth import BaseAuth, Credentials, JwtAuth

__all__ = ["DEFAULT_MAX_BODY_BYTES", "BaseAuth", "Credentials", "JwtAuth", "create_app"]
