"""Former home of ``StreamChunk`` / ``StreamEvent``; they live in
``tenxgraph.core.state.stream_chunks`` (10xGraph's documented path). Kept so existing imports
keep working."""

from tenxgraph.core.state.stream_chunks import StreamChunk, StreamEvent

__all__ = ["StreamChunk", "StreamEvent"]
