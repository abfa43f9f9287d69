"""Prebuilt tools (10xGraph's ``agentflow.prebuilt.tools``): the handoff tools of
:mod:`tenxgraph.prebuilt.tools.handoff` and the web tools of :mod:`tenxgraph.prebuilt.tools.web`
(``fetch_url``, ``google_web_search``)."""

from tenxgraph.prebuilt.tools.handoff import HANDOFF_PREFIX, create_handoff_tool, is_handoff_tool
from tenxgraph.prebuilt.tools.web import fetch_url, google_web_search, make_fetch_url

__all__ = [
    "HANDOFF_PREFIX",
    "create_handoff_tool",
    "fetch_url",
    "google_web_search",
    "is_handoff_tool",
    "make_fetch_url",
]
