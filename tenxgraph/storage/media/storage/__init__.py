"""Media store backends: :class:`BaseMediaStore` and the in-memory, local-file and cloud
stores (also exported by :mod:`tenxgraph.storage.media`)."""

from __future__ import annotations

from .base import BaseMediaStore
from .cloud_store import CloudMediaStore
from .local_store import LocalFileMediaStore
from .memory_store import InMemoryMediaStore

__all__ = ["BaseMediaStore", "CloudMediaStore", "InMemoryMediaStore", "LocalFileMediaStore"]
