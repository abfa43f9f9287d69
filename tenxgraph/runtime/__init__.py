"""Runtime integrations around a graph run: event publishers (``tenxgraph.runtime.publisher``)."""
