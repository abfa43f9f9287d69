"""The prebuilt agents (PlanActReflect, StructuredOutput, SupervisorTeam, Swarm, RAG): their
graphs, runs against local provider wire servers (scripted answers), and durable runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import pydantic
import pytest

from tenxgraph.core.exceptions import ConfigError, UnsupportedArgumentError
from tenxgraph.core.graph import Agent, ToolNode
from tenxgraph.core.state import Message
from tenxgraph.prebuilt.agent import (
    PlanActReflectAgent,
    RAGAgent,
    StructuredOutputAgent,
    SupervisorTeamAgent,
    SwarmAgent,
    SwarmMemberConfig,
    WorkerConfig,
)
from tenxgraph.storage.checkpointer import PgCheckpointer, SqliteCheckpointer
from tenxgraph.utils import END
from tests.providers._wire_servers import Answer, GeminiServer, OpenAIServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def gpt() -> Iterator[OpenAIServer]:
    srv = OpenAIServer()
    yield srv
    srv.close()


@pytest.fixture
def gemini() -> Iterator[GeminiServer]:
    srv = GeminiServer()
    yield srv
    srv.close()


def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


def _edges(app: Any) -> set[tuple[str, str]]:
    graph = app.get_graph() if hasattr(app, "get_graph") else None
    assert graph is not None
    return {(e.source, e.target) for e in graph.edges}


def _roles(out: dict[str, Any]) -> list[str]:
    return [m.role for m in out["messages"]]


def _user(text: str, mid: str | None = None) -> dict[str, Any]:
    msg = Message.text_message(text)
    if mid:
        msg = msg.model_copy(update={"message_id": mid})
    return {"messages": [msg]}


# -- PlanActReflectAgent --------------------------------------------------------------------
async def test_plan_act_reflect_loops_until_done(gpt: OpenAIServer, tmp_path: Path) -> None:
    gpt.answers += [
        Answer(calls=[("lookup", {"topic": "fusion"})]),  # PLAN calls a tool
        Answer(text="Missing: costs."),  # REFLECT: not done
        Answer(text="Costs are high."),  # PLAN again, no tool
        Answer(text="Fusion summary. [DONE]"),  # REFLECT: done
    ]
    agent = PlanActReflectAgent(
        model="gpt-4o-mini",
        provider="openai",
        tools=[lookup],
        max_iterations=5,
        base_url=gpt.url + "/v1",
        api_key="k",
    )
    app = agent.compile(checkpointer=SqliteCheckpointer(str(tmp_path / "p.db")))
    nodes = set(app.node_objects)
    assert nodes >= {"PLAN", "ACT", "REFLECT", "INCREMENT_ITERATIONS"}
    out = await app.ainvoke(_user("research fusion"), {"thread_id": "p"})
    assert out["messages"][-1].text() == "Fusion summary. [DONE]"
    assert _roles(out) == ["user", "assistant", "tool", "assistant", "assistant", "assistant"]
    assert len(gpt.requests) == 4
    # the reflector never sees tool traffic; the planner does
    reflect_body = gpt.requests[1]
    assert all(m["role"] != "tool" and not m.get("tool_calls") for m in reflect_body["messages"])
    assert "tools" not in reflect_body or not reflect_body["tools"]
    assert any(m["role"] == "tool" for m in gpt.requests[2]["messages"])
    await app.aclose()


async def test_plan_act_reflect_stops_at_max_iterations(gpt: OpenAIServer) -> None:
    gpt.answers += [Answer(text=f"step {i}") for i in range(10)]
    app = PlanActReflectAgent(
        model="gpt-4o-mini", max_iterations=2, base_url=gpt.url + "/v1", api_key="k"
    ).compile()
    await app.ainvoke(_user("think"), {"thread_id": "m"})
    # PLAN, REFLECT (not done), INCREMENT, PLAN, REFLECT (2nd reflection: cap) -> END
    assert len(gpt.requests) == 4
    await app.aclose()


async def test_plan_act_reflect_resumes_from_postgres_without_calling_the_planner_again(
    gpt: OpenAIServer, pg_dsn: str, pg_schema: str
) -> None:
    gpt.answers += [Answer(text="plan: answer directly"), Answer(text="All good. [DONE]")]
    agent = PlanActReflectAgent(model="gpt-4o-mini", base_url=gpt.url + "/v1", api_key="k")
    cp = PgCheckpointer(pg_dsn, schema=pg_schema)
    app = agent.compile(checkpointer=cp, interrupt_before=["REFLECT"])
    cfg = {"thread_id": "durable"}
    await app.ainvoke(_user("q", "u1"), dict(cfg))
    assert len(gpt.requests) == 1  # paused before REFLECT, the plan is stored
    await app.aclose()
    # a new process-like start: a fresh graph and checkpointer on the same schema
    app2 = PlanActReflectAgent(model="gpt-4o-mini", base_url=gpt.url + "/v1", api_key="k").compile(
        checkpointer=PgCheckpointer(pg_dsn, schema=pg_schema), interrupt_before=["REFLECT"]
    )
    await app2.ainvoke(None, dict(cfg))
    state = await app2.aget_state(dict(cfg))
    assert [m.text() for m in state.context] == ["q", "plan: answer directly", "All good. [DONE]"]
    assert len(gpt.requests) == 2  # only the reflector was asked
    again = await app2.ainvoke(_user("q", "u1"), dict(cfg))  # the same input again
    assert again.get("already_processed") is True and len(gpt.requests) == 2
    await app2.aclose()


def test_plan_act_reflect_refuses_unsupported_options() -> None:
    with pytest.raises(UnsupportedArgumentError) as info:
        PlanActReflectAgent(model="gpt-4o-mini", memory=object(), api_key="k")
    assert info.value.error_code == "GRAPH_010"
    with pytest.raises(UnsupportedArgumentError) as info:
        PlanActReflectAgent(model="gpt-4o-mini", api_key="k", client=object())
    assert info.value.context["argument"] == "client"
    with pytest.raises(ConfigError):
        PlanActReflectAgent(model="gpt-4o-mini", api_key="k", max_iterations=0)


# -- StructuredOutputAgent ------------------------------------------------------------------
class Review(pydantic.BaseModel):
    product: str
    score: float = pydantic.Field(ge=0, le=10)


class Weather(TypedDict):
    city: str
    celsius: float


async def test_structured_output_repairs_an_invalid_answer(gpt: OpenAIServer) -> None:
    gpt.answers += [
        Answer(text='{"product": "X", "score": 42}'),  # out of range
        Answer(text='```json\n{"product": "X", "score": 7}\n```'),
    ]
    agent = StructuredOutputAgent(
        model="gpt-4o-mini", output_schema=Review, base_url=gpt.url + "/v1", api_key="k"
    )
    app = agent.compile()
    assert set(app.node_objects) == {"GENERATE", "REPAIR"}
    out = await app.ainvoke(_user("review X"), {"thread_id": "s"})
    assert agent.parse(out["messages"][-1]) == Review(product="X", score=7)
    repair = out["messages"][-2]
    assert repair.role == "user" and "score" in repair.text() and '"maximum"' in repair.text()
    fmt = gpt.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Review"
    await app.aclose()


async def test_structured_output_gives_up_after_max_attempts_with_a_typeddict(
    gemini: GeminiServer,
) -> None:
    gemini.answers += [Answer(text="not json") for _ in range(5)]
    agent = StructuredOutputAgent(
        model="gemini-2.5-flash",
        provider="google",
        output_schema=Weather,
        max_attempts=1,
        base_url=gemini.url,
        api_key="k",
    )
    app = agent.compile()
    out = await app.ainvoke(_user("weather?"), {"thread_id": "w"})
    assert len(gemini.requests) == 2 and out["messages"][-1].text() == "not json"
    gen = gemini.requests[0]["generationConfig"]
    assert gen["responseMimeType"] == "application/json"
    with pytest.raises(Exception) as info:
        agent.parse(out["messages"][-1])
    assert getattr(info.value, "error_code", "") == "VALIDATION_000"
    await app.aclose()


async def test_structured_output_with_tools_and_a_repair_agent(gpt: OpenAIServer) -> None:
    gpt.answers += [
        Answer(calls=[("lookup", {"topic": "X"})]),
        Answer(text="X is fine"),  # invalid
        Answer(text='{"product": "X", "score": 5}'),  # the repair agent's answer
    ]
    agent = StructuredOutputAgent(
        model="gpt-4o-mini",
        output_schema=Review,
        tools=[lookup],
        repair_system_prompt=[{"role": "system", "content": "fix the JSON"}],
        base_url=gpt.url + "/v1",
        api_key="k",
    )
    app = agent.compile()
    assert set(app.node_objects) == {"GENERATE", "TOOL", "REPAIR", "REPAIR_AGENT"}
    out = await app.ainvoke(_user("review X"), {"thread_id": "t"})
    assert agent.parse(out["messages"][-1]).score == 5
    assert gpt.requests[2]["messages"][0]["content"] == "fix the JSON"
    await app.aclose()


def test_structured_output_refuses_a_non_schema() -> None:
    with pytest.raises(ConfigError):
        StructuredOutputAgent(model="gpt-4o-mini", output_schema=object(), api_key="k")


# -- SupervisorTeamAgent --------------------------------------------------------------------
async def test_supervisor_delegates_then_finishes(gpt: OpenAIServer, gemini: GeminiServer) -> None:
    gemini.answers += [Answer(text="RESEARCHER"), Answer(text="WRITER"), Answer(text="FINISH")]
    gpt.answers += [
        Answer(calls=[("lookup", {"topic": "tides"})]),
        Answer(text="tides come from the moon"),
        Answer(text="Report: the moon."),
    ]

    def worker(prompt: str, tools: list[Any] | None = None) -> Agent:
        return Agent(
            model="gpt-4o-mini",
            base_url=gpt.url + "/v1",
            api_key="k",
            tool_node=ToolNode(tools) if tools else None,
            system_prompt=[{"role": "system", "content": prompt}],
        )

    team = SupervisorTeamAgent(
        supervisor_model="gemini-2.5-flash",
        provider="google",
        base_url=gemini.url,
        api_key="k",
        workers={
            "RESEARCHER": WorkerConfig(worker("research", [lookup]), "Finds facts."),
            "WRITER": WorkerConfig(worker("write"), "Writes reports."),
        },
    )
    app = team.compile()
    assert set(app.node_objects) == {
        "SUPERVISOR",
        "PRE_SUPERVISOR",
        "RESEARCHER",
        "RESEARCHER_TOOL",
        "WRITER",
    }
    out = await app.ainvoke(_user("explain tides"), {"thread_id": "sup"})
    assert [m.text() for m in out["messages"] if m.role == "assistant"][-2:] == [
        "Report: the moon.",
        "FINISH",
    ]
    prompt = gemini.requests[0]["systemInstruction"]["parts"][0]["text"]
    assert "RESEARCHER: Finds facts." in prompt and "FINISH" in prompt
    await app.aclose()


async def test_supervisor_stops_at_max_rounds_and_on_an_unknown_name(gpt: OpenAIServer) -> None:
    gpt.answers += [Answer(text="W"), Answer(text="done"), Answer(text="W"), Answer(text="x")]
    w = Agent(model="gpt-4o-mini", base_url=gpt.url + "/v1", api_key="k")
    team = SupervisorTeamAgent(
        supervisor_model="gpt-4o-mini",
        base_url=gpt.url + "/v1",
        api_key="k",
        workers={"W": WorkerConfig(w)},
        max_rounds=1,
    )
    app = team.compile()
    await app.ainvoke(_user("go"), {"thread_id": "r"})
    assert len(gpt.requests) == 3  # SUPERVISOR, W, SUPERVISOR (cap reached)
    gpt.answers.clear()
    gpt.answers += [Answer(text="SOMEONE ELSE")]
    await app.ainvoke(_user("go"), {"thread_id": "r2"})
    assert len(gpt.requests) == 4
    with pytest.raises(ConfigError):
        SupervisorTeamAgent(supervisor_model="gpt-4o-mini", workers={})
    with pytest.raises(ConfigError):
        SupervisorTeamAgent(supervisor_model="gpt-4o-mini", workers={"FINISH": WorkerConfig(w)})
    await app.aclose()


# -- SwarmAgent -----------------------------------------------------------------------------
async def test_swarm_hands_off_through_the_tool_node(gpt: OpenAIServer, tmp_path: Path) -> None:
    gpt.answers += [
        Answer(calls=[("transfer_to_RESEARCHER", {})]),
        Answer(calls=[("lookup", {"topic": "qubits"})]),
        Answer(calls=[("transfer_to_WRITER", {})]),
        Answer(text="Final report."),
    ]

    def member(prompt: str, tools: list[Any] | None = None) -> Agent:
        return Agent(
            model="gpt-4o-mini",
            base_url=gpt.url + "/v1",
            api_key="k",
            tool_node=ToolNode(tools) if tools else None,
            system_prompt=[{"role": "system", "content": prompt}],
        )

    researcher = member("research", [lookup])
    swarm = SwarmAgent(
        members={
            "TRIAGE": SwarmMemberConfig(member("triage"), ["RESEARCHER", "WRITER"], "Routes."),
            "RESEARCHER": SwarmMemberConfig(researcher, ["WRITER"], "Finds facts."),
            "WRITER": SwarmMemberConfig(member("write"), [], "Writes."),
        },
        entry="TRIAGE",
    )
    app = swarm.compile(checkpointer=SqliteCheckpointer(str(tmp_path / "s.db")))
    assert set(app.node_objects) == {
        "TRIAGE",
        "TRIAGE_TOOL",
        "RESEARCHER",
        "RESEARCHER_TOOL",
        "WRITER",
    }
    out = await app.ainvoke(_user("report on qubits", "u1"), {"thread_id": "sw"})
    texts = [(m.role, m.text()) for m in out["messages"]]
    assert ("tool", "Handed off to RESEARCHER.") in texts and (
        "tool",
        "facts about qubits",
    ) in texts
    assert texts[-1] == ("assistant", "Final report.")
    offered = [sorted(t["function"]["name"] for t in r.get("tools") or ()) for r in gpt.requests]
    assert offered == [
        ["transfer_to_RESEARCHER", "transfer_to_WRITER"],
        ["lookup", "transfer_to_WRITER"],
        ["lookup", "transfer_to_WRITER"],
        [],
    ]
    # the caller's agent keeps its own tools
    assert researcher.tool_node is not None and len(researcher.tool_node._tools) == 1
    again = await app.ainvoke(_user("report on qubits", "u1"), {"thread_id": "sw"})
    assert again.get("already_processed") is True and len(gpt.requests) == 4
    await app.aclose()


def test_swarm_refuses_bad_members() -> None:
    a = Agent(model="gpt-4o-mini", api_key="k")
    with pytest.raises(ConfigError):
        SwarmAgent(members={"A": SwarmMemberConfig(a)}, entry="B")
    with pytest.raises(ConfigError):
        SwarmAgent(members={"A": SwarmMemberConfig(a, ["C"])}, entry="A")
    with pytest.raises(ConfigError):
        SwarmAgent(members={"A": SwarmMemberConfig(...)}, entry="A")  # type: ignore[arg-type]
    # a lone member has no one to hand off to: no tool node, its turn ends the run
    app = SwarmAgent(members={"A": SwarmMemberConfig(a)}, entry="A").compile()
    assert set(app.node_objects) == {"A"}


# -- RAGAgent -------------------------------------------------------------------------------
class _Store:
    def __init__(self, docs: list[str]) -> None:
        self.docs = docs
        self.calls: list[tuple[str, int, dict[str, Any]]] = []

    async def asearch(self, query: str, *, limit: int, **options: Any) -> list[Any]:
        self.calls.append((query, limit, options))
        return [{"content": d} for d in self.docs][:limit]


class _Shortest:
    async def arerank(self, query: str, documents: list[str], top_n: int) -> list[str]:
        return sorted(documents, key=len)[:top_n]


async def test_rag_retrieves_reranks_and_answers(gpt: OpenAIServer) -> None:
    gpt.answers.append(Answer(text="Refunds within 30 days."))
    store = _Store(["a long refund policy text", "refund: 30 days", "shipping info here!"])
    rag = RAGAgent(
        store=store,
        agent=Agent(model="gpt-4o-mini", base_url=gpt.url + "/v1", api_key="k"),
        reranker=_Shortest(),
        top_k=3,
        top_n=1,
        score_threshold=0.2,
        store_config={"user_id": "u42"},
    )
    app = rag.compile()
    assert set(app.node_objects) == {"RETRIEVE", "RERANK", "SYNTHESIZE"}
    out = await app.ainvoke(_user("refund policy?"), {"thread_id": "rag"})
    assert store.calls == [
        ("refund policy?", 3, {"score_threshold": 0.2, "config": {"user_id": "u42"}})
    ]
    sent = gpt.requests[0]["messages"][-1]["content"]
    assert sent == "<context>\n[1] refund: 30 days\n</context>\n\nrefund policy?"
    # the stored conversation keeps the user's own words
    assert [m.text() for m in out["messages"]] == ["refund policy?", "Refunds within 30 days."]
    await app.aclose()


def test_rag_refuses_a_store_without_asearch() -> None:
    with pytest.raises(ConfigError):
        RAGAgent(store=object(), agent=Agent(model="gpt-4o-mini", api_key="k"))  # type: ignore[arg-type]
    app = RAGAgent(store=_Store([]), agent=Agent(model="gpt-4o-mini", api_key="k")).compile()
    assert set(app.node_objects) == {"RETRIEVE", "SYNTHESIZE"}
    assert json.dumps(sorted(app.node_objects))  # plain names, serialisable
    _ = END
