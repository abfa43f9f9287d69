"""``RAGAgent``: retrieve documents for the newest question, then let an agent answer from them.

Graph: ``RETRIEVE`` -> (``RERANK`` when a reranker is given) -> ``SYNTHESIZE`` -> ``END``.

* ``RETRIEVE`` takes the newest ``user`` message's text as the query and awaits
  ``store.asearch(query, limit=top_k, **options)`` (options: ``score_threshold``,
  ``retrieval_strategy`` and ``config=store_config`` when set). Each result may be a string,
  a dict with ``"content"`` (or ``"text"``) or an object with a ``content`` attribute; the texts
  are kept in the run's ``execution_meta.internal_data["rag_docs"]``.
* ``RERANK`` awaits ``reranker.arerank(query, docs, top_n=top_n)`` and keeps its list.
* ``SYNTHESIZE`` calls the agent on a copy of the state whose newest user message is replaced
  by ``<context>`` (the numbered documents) followed by the question; the stored conversation
  keeps the user's own message, and the agent's answer is appended to it.

tenxgraph ships no vector store (10xGraph's Qdrant / Mem0 stores are outside its scope): any
object with that ``asearch`` coroutine works, as does any reranker with ``arerank``.
"""

from __future__ import annotations

from typing import Any, Protocol

from tenxgraph.core.exceptions import ConfigError
from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.prebuilt.agent._common import PrebuiltGraph, last_user_index
from tenxgraph.utils import END

__all__ = ["BaseReranker", "RAGAgent", "SearchStore"]

_KEY = "rag_docs"


class SearchStore(Protocol):
    """What ``RAGAgent`` needs of a knowledge base."""

    async def asearch(self, query: str, *, limit: int, **options: Any) -> list[Any]:
        """The ``limit`` best matches of ``query``, best first."""
        ...


class BaseReranker(Protocol):
    """What ``RAGAgent`` needs of a reranker."""

    async def arerank(self, query: str, documents: list[str], top_n: int) -> list[str]:
        """The ``top_n`` most relevant of ``documents`` for ``query``, best first."""
        ...


def _text_of(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        return str(item.get("content", item.get("text", "")))
    return str(getattr(item, "content", item))


def _query(state: AgentState) -> str:
    i = last_user_index(list(state.context))
    return state.context[i].text() if i is not None else ""


class RAGAgent(PrebuiltGraph):
    """Retrieve, optionally rerank, then answer, compiled into a graph (module docstring).

    Args:
        store: the knowledge base (a :class:`SearchStore`).
        agent: the ``Agent`` writing the answer (its system prompt is left as it is).
        reranker: a :class:`BaseReranker`; adds the ``RERANK`` node.
        top_k: documents retrieved (>= 1, default 5).
        top_n: documents kept after reranking (>= 1, default 3; unused without reranker).
        retrieval_strategy: passed to ``asearch`` when set.
        score_threshold: passed to ``asearch`` when set.
        store_config: passed to ``asearch`` as ``config=`` when set.
        state: a state instance or ``AgentState`` subclass (as ``StateGraph``).
        publisher: as ``StateGraph(publisher=...)``.
        container: as ``StateGraph(container=...)``.

    Raises:
        ConfigError: ``CONFIG_001`` for a store without ``asearch``, a reranker without
            ``arerank``, an agent that is not an ``Agent``, or ``top_k`` / ``top_n`` < 1.
    """

    def __init__(
        self,
        store: SearchStore,
        agent: Agent,
        reranker: BaseReranker | None = None,
        top_k: int = 5,
        top_n: int = 3,
        retrieval_strategy: Any = None,
        score_threshold: float | None = None,
        store_config: dict[str, Any] | None = None,
        state: Any = None,
        publisher: Any = None,
        container: Any = None,
    ) -> None:
        if not callable(getattr(store, "asearch", None)):
            raise ConfigError("RAGAgent(store=...) needs an object with asearch()", context={})
        if reranker is not None and not callable(getattr(reranker, "arerank", None)):
            raise ConfigError("RAGAgent(reranker=...) needs an object with arerank()", context={})
        if not isinstance(agent, Agent):
            raise ConfigError("RAGAgent(agent=...) takes an Agent", context={})
        for name, value in (("top_k", top_k), ("top_n", top_n)):
            if not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"RAGAgent({name}=...) must be an int >= 1, got {value!r}",
                    context={name: value},
                )
        self.store, self.agent, self.reranker = store, agent, reranker
        self.top_k, self.top_n = top_k, top_n
        self.options: dict[str, Any] = {}
        if retrieval_strategy is not None:
            self.options["retrieval_strategy"] = retrieval_strategy
        if score_threshold is not None:
            self.options["score_threshold"] = score_threshold
        if store_config is not None:
            self.options["config"] = store_config
        self._graph_kwargs = {"state": state, "publisher": publisher, "container": container}

    async def _retrieve(self, state: AgentState) -> None:
        query = _query(state)
        found = await self.store.asearch(query, limit=self.top_k, **self.options) if query else []
        docs = [t for t in (_text_of(x) for x in found or ()) if t]
        state.execution_meta.internal_data[_KEY] = docs[: self.top_k]

    async def _rerank(self, state: AgentState) -> None:
        assert self.reranker is not None
        docs = list(state.execution_meta.internal_data.get(_KEY, []))
        if docs:
            ranked = await self.reranker.arerank(_query(state), docs, top_n=self.top_n)
            state.execution_meta.internal_data[_KEY] = [str(d) for d in ranked][: self.top_n]

    async def _synthesize(self, state: AgentState, config: dict[str, Any]) -> Message:
        docs = list(state.execution_meta.internal_data.get(_KEY, []))
        context = list(state.context)
        i = last_user_index(context)
        if i is not None and docs:
            numbered = "\n".join(f"[{n}] {d}" for n, d in enumerate(docs, 1))
            context[i] = Message.text_message(
                f"<context>\n{numbered}\n</context>\n\n{context[i].text()}", role="user"
            )
        shown = state.model_copy(update={"context": context})
        return await self.agent.execute(shown, config)

    def build(self) -> StateGraph[AgentState]:
        """The uncompiled graph (``RETRIEVE``, ``RERANK`` with a reranker, ``SYNTHESIZE``)."""
        graph: StateGraph[AgentState] = StateGraph(**self._graph_kwargs)
        graph.add_node("RETRIEVE", self._retrieve)
        graph.add_node("SYNTHESIZE", self._synthesize)
        if self.reranker is not None:
            graph.add_node("RERANK", self._rerank)
            graph.add_edge("RETRIEVE", "RERANK")
            graph.add_edge("RERANK", "SYNTHESIZE")
        else:
            graph.add_edge("RETRIEVE", "SYNTHESIZE")
        graph.add_edge("SYNTHESIZE", END)
        graph.set_entry_point("RETRIEVE")
        return graph
