"""Adapters between provider SDK objects and tenxgraph messages (``.llm``)."""
