"""10xGraph's module path for ``BaseCheckpointer`` (its extensibility guide imports it from
here); the class lives in ``tenxgraph.storage.checkpointer.base``."""

from __future__ import annotations

from tenxgraph.storage.checkpointer.base import BaseCheckpointer

__all__ = ["BaseCheckpointer"]
