"""Skills as 10xGraph's skills reference and tutorial describe them, against the local
chat-completions server: the trigger table and the ``set_skill`` tool an on-demand agent
sends, the skill text coming back as a (ledger-recorded) tool result, session mode, hot
reload, and the registry's own API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import GraphError, ValidationError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.skills import SkillConfig, SkillMeta, SkillsRegistry
from tenxgraph.core.state import AgentState
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END

from ._fake_llm_server import ScriptedLLMServer, text, tool_calls

pytestmark = pytest.mark.anyio

SQL = """---
name: sql-helper
description: Write and debug SQL queries.
triggers:
  - "sql"
  - "join"
tags: [database]
priority: 10
resources:
  - schema.sql
---
# SQL helper

Always qualify columns with their table.
"""

REVIEW = """---
name: code-review
description: Review a diff.
triggers: ["review"]
priority: 50
---
Point out bugs before style.
"""


def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    (root / "sql").mkdir(parents=True)
    (root / "sql" / "SKILL.md").write_text(SQL, encoding="utf-8")
    (root / "sql" / "schema.sql").write_text("create table users(id int);", encoding="utf-8")
    (root / "review").mkdir()
    (root / "review" / "SKILL.md").write_text(REVIEW, encoding="utf-8")
    return root


def weather(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def react(agent: Agent, tool_node: ToolNode, cp: Any = None) -> Any:
    g = StateGraph()
    g.add_node("MAIN", agent)
    g.add_node("TOOL", tool_node)
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=cp)


async def test_on_demand_skill_loaded_through_set_skill(
    llm: ScriptedLLMServer, tmp_path: Path
) -> None:
    root = skills_dir(tmp_path)
    llm.add(
        tool_calls(("set_skill", {"skill_name": "sql-helper"})),
        text("SELECT users.id FROM users"),
    )
    tools = ToolNode([weather])
    agent = Agent(
        model="gpt-4o",
        base_url=llm.base_url,
        system_prompt=[{"role": "system", "content": "You help."}],
        tool_node=tools,
        skills=SkillConfig(skills_dir=str(root)),
    )
    assert agent.get_tool_node() is tools and tools.get_tool("set_skill") is not None
    cp = SqliteCheckpointer(str(tmp_path / "s.db"))
    app = react(agent, tools, cp)
    out = await app.ainvoke({"messages": ["write a sql join"]}, {"thread_id": "sk"})
    first = llm.bodies[0]
    # The table follows the system prompt, by priority; set_skill is offered with weather.
    assert first["messages"][0]["content"] == "You help."
    table = first["messages"][1]
    assert table["role"] == "system" and "| sql-helper |" in table["content"]
    assert table["content"].index("code-review") < table["content"].index("sql-helper")
    names = [t["function"]["name"] for t in first["tools"]]
    assert names == ["weather", "set_skill"]
    params = first["tools"][1]["function"]["parameters"]
    assert params["required"] == ["skill_name"]
    # The skill's text came back as the tool result and was sent with the next request.
    tool_msg = next(m for m in out["messages"] if m.role == "tool")
    assert "Always qualify columns" in tool_msg.text() and "---" not in tool_msg.text()
    assert any("Always qualify columns" in str(m.get("content")) for m in llm.bodies[1]["messages"])
    state = await app.aget_state({"thread_id": "sk"})
    assert state.context[-1].text() == "SELECT users.id FROM users"
    await app.aclose()


async def test_set_skill_resources_and_unknown_names(
    llm: ScriptedLLMServer, tmp_path: Path
) -> None:
    root = skills_dir(tmp_path)
    tools = ToolNode([])
    Agent(
        model="gpt-4o",
        base_url=llm.base_url,
        tool_node=tools,
        skills=SkillConfig(skills_dir=str(root)),
    )
    msg = await tools.invoke(
        "set_skill", {"skill_name": "sql-helper", "resource_name": "schema.sql"}
    )
    assert msg.text() == "create table users(id int);"
    bad = await tools.invoke("set_skill", {"skill_name": "nope"})
    assert bad.content[0].is_error and "code-review, sql-helper" in bad.text()


async def test_session_mode_sends_the_states_skill(llm: ScriptedLLMServer, tmp_path: Path) -> None:
    class Persona(AgentState):
        SKILL_NAME: str = ""

    root = skills_dir(tmp_path)
    agent = Agent(
        model="gpt-4o",
        base_url=llm.base_url,
        skills=SkillConfig(skills_dir=str(root), mode="session", preload_from="SKILL_NAME"),
    )
    g = StateGraph(Persona)
    g.add_node("MAIN", agent)
    g.set_entry_point("MAIN")
    g.add_edge("MAIN", END)
    app = g.compile()
    llm.add(text("LGTM"), text("plain"))
    await app.ainvoke(
        {"messages": ["look at this"], "state": {"SKILL_NAME": "code-review"}}, {"thread_id": "p"}
    )
    body = llm.bodies[0]
    assert body["messages"][0] == {"role": "system", "content": "Point out bugs before style.\n"}
    assert "tools" not in body  # no table, no set_skill in session mode
    await app.ainvoke({"messages": ["hi"]}, {"thread_id": "other"})  # no skill named: none sent
    assert llm.bodies[1]["messages"][0]["role"] == "user"
    with pytest.raises(ValidationError, match="not-there"):
        await app.ainvoke(
            {"messages": ["x"], "state": {"SKILL_NAME": "not-there"}}, {"thread_id": "bad"}
        )


async def test_hot_reload_and_configuration_errors(llm: ScriptedLLMServer, tmp_path: Path) -> None:
    root = skills_dir(tmp_path)
    agent = Agent(
        model="gpt-4o",
        base_url=llm.base_url,
        tool_node="TOOL",
        skills=SkillConfig(skills_dir=str(root)),
    )
    state = AgentState()
    (root / "new").mkdir()
    (root / "new" / "SKILL.md").write_text(
        "---\nname: fresh\ndescription: Added later.\n---\nbody\n", encoding="utf-8"
    )
    table = agent.build_messages(state)[0].text()
    assert "| fresh |" in table  # picked up without a restart
    frozen = Agent(
        model="gpt-4o",
        base_url=llm.base_url,
        tool_node="TOOL",
        skills=SkillConfig(skills_dir=str(root), hot_reload=False, inject_trigger_table=False),
    )
    assert frozen.build_messages(state) == []
    with pytest.raises(GraphError) as info:
        Agent(model="gpt-4o", base_url=llm.base_url, skills=SkillConfig(skills_dir=str(root)))
    assert info.value.error_code == "GRAPH_001"  # on-demand needs a tool node
    with pytest.raises(GraphError):
        Agent(model="gpt-4o", base_url=llm.base_url, skills={"skills_dir": str(root)})
    with pytest.raises(ValueError):
        SkillConfig(skills_dir="")
    with pytest.raises(ValueError):
        SkillConfig(skills_dir=str(root), mode="session")  # preload_from is needed
    disabled = Agent(model="gpt-4o", base_url=llm.base_url, skills=SkillConfig(skills_dir=None))
    assert disabled.build_messages(state) == []


def test_registry_api(tmp_path: Path) -> None:
    root = skills_dir(tmp_path)
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text("no front matter", encoding="utf-8")
    reg = SkillsRegistry()
    found = reg.discover(root)
    assert sorted(m.name for m in found) == ["code-review", "sql-helper"]  # broken skipped
    assert len(reg) == 2 and "sql-helper" in reg and reg.names() == ["code-review", "sql-helper"]
    meta = reg.get("sql-helper")
    assert meta is not None and meta.tags == {"database"} and meta.priority == 10
    assert meta.skill_file.endswith("SKILL.md")
    assert [m.name for m in reg.get_all(tags=["database"])] == ["sql-helper"]
    assert reg.load_content("sql-helper").startswith("# SQL helper")
    assert reg.load_content("unknown") == ""
    assert reg.load_resources("sql-helper") == {"schema.sql": "create table users(id int);"}
    assert reg.unregister("code-review") and not reg.unregister("code-review")
    assert reg.build_trigger_table().count("| sql-helper |") == 1
    assert SkillsRegistry().build_trigger_table() == ""
    with pytest.raises(ValueError):
        SkillMeta(name="Bad Name", description="x")
    with pytest.raises(ValueError):
        SkillMeta(name="ok", description="x", resources=["../secret"])
    with pytest.raises(ValidationError):
        reg.discover(tmp_path / "missing")


async def test_a_symlinked_resource_leaving_the_skill_is_refused(
    llm: ScriptedLLMServer, tmp_path: Path
) -> None:
    root = skills_dir(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("db password", encoding="utf-8")
    (root / "sql" / "schema.sql").unlink()
    (root / "sql" / "schema.sql").symlink_to(secret)  # declared resource, real path outside
    reg = SkillsRegistry()
    reg.discover(root)
    with pytest.raises(ValidationError) as info:
        reg.load_resources("sql-helper")
    assert info.value.error_code == "VALIDATION_000" and "outside" in str(info.value)
    assert "db password" not in str(info.value)
    tools = ToolNode([])
    Agent(
        model="gpt-4o",
        base_url=llm.base_url,
        tool_node=tools,
        skills=SkillConfig(skills_dir=str(root)),
    )
    msg = await tools.invoke(
        "set_skill", {"skill_name": "sql-helper", "resource_name": "schema.sql"}
    )
    assert msg.content[0].is_error and "outside" in msg.text()
    assert "db password" not in msg.text()
    # a link that stays inside the skill directory is still read
    (root / "sql" / "real.sql").write_text("select 1;", encoding="utf-8")
    (root / "sql" / "schema.sql").unlink()
    (root / "sql" / "schema.sql").symlink_to(root / "sql" / "real.sql")
    assert reg.load_resources("sql-helper") == {"schema.sql": "select 1;"}


def test_discover_with_a_duplicate_name_changes_nothing(tmp_path: Path) -> None:
    reg = SkillsRegistry()
    first = tmp_path / "first"
    (first / "review").mkdir(parents=True)
    (first / "review" / "SKILL.md").write_text(REVIEW, encoding="utf-8")
    reg.discover(first)
    before = reg.get("code-review")
    root = skills_dir(tmp_path)  # code-review (again) and sql-helper ...
    (root / "zz").mkdir()
    (root / "zz" / "SKILL.md").write_text(REVIEW, encoding="utf-8")  # ... and a duplicate
    with pytest.raises(ValidationError) as info:
        reg.discover(root)
    assert "code-review" in str(info.value)
    # nothing of the failed discovery was registered, the earlier entry is untouched
    assert reg.names() == ["code-review"] and reg.get("code-review") is before
    assert reg.load_content("code-review").startswith("Point out bugs")
