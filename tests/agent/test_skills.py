"""Skills end to end, against the local chat-completions server: the catalog and the
``activate_skill`` / ``read_skill_resource`` tools an on-demand agent offers, the skill text
coming back as a (ledger-recorded) tool result, session mode, hot reload, configuration errors,
and the documented registry API (trigger table, ``set_skill``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import GraphError, ValidationError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.skills import SkillConfig, SkillsRegistry
from tenxgraph.core.skills.activation import get_active_skills, skill_content_marker
from tenxgraph.core.state import AgentState
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END

from ._fake_llm_server import ScriptedLLMServer, text, tool_calls

pytestmark = pytest.mark.anyio

SQL = """---
name: sql-helper
description: Write and debug SQL queries.
metadata:
  triggers: "sql; join"
  tags: database
  priority: "10"
---
# SQL helper

Always qualify columns with their table. The schema is in schema.sql.
"""

REVIEW = """---
name: code-review
description: Review a diff.
metadata:
  triggers: review
  priority: "50"
---
Point out bugs before style.
"""


def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    (root / "sql-helper").mkdir(parents=True)
    (root / "sql-helper" / "SKILL.md").write_text(SQL, encoding="utf-8")
    (root / "sql-helper" / "schema.sql").write_text("create table users(id int);", "utf-8")
    (root / "code-review").mkdir()
    (root / "code-review" / "SKILL.md").write_text(REVIEW, encoding="utf-8")
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


async def test_on_demand_skill_is_activated_through_the_tool(
    llm: ScriptedLLMServer, tmp_path: Path
) -> None:
    root = skills_dir(tmp_path)
    llm.add(
        tool_calls(("activate_skill", {"skill_name": "sql-helper"})),
        tool_calls(("read_skill_resource", {"skill_name": "sql-helper", "path": "schema.sql"})),
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
    assert agent.get_tool_node() is tools
    assert tools.tool_names == ["weather", "activate_skill", "read_skill_resource"]
    cp = SqliteCheckpointer(str(tmp_path / "s.db"))
    app = react(agent, tools, cp)
    out = await app.ainvoke({"messages": ["write a sql join"]}, {"thread_id": "sk"})
    first = llm.bodies[0]
    # The catalog follows the system prompt, highest priority first.
    assert first["messages"][0]["content"] == "You help."
    catalog = first["messages"][1]["content"]
    assert first["messages"][1]["role"] == "system" and "<available_skills>" in catalog
    assert catalog.index("code-review") < catalog.index("sql-helper")
    assert "<triggers>sql; join</triggers>" in catalog
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assert list(offered) == ["weather", "activate_skill", "read_skill_resource"]
    assert offered["activate_skill"]["properties"]["skill_name"]["enum"] == [
        "code-review",
        "sql-helper",
    ]
    # The skill's text came back as a tool result, wrapped, without its front matter.
    results = [m.text() for m in out["messages"] if m.role == "tool"]
    assert results[0].startswith(skill_content_marker("sql-helper"))
    assert "Always qualify columns" in results[0] and "---" not in results[0]
    assert "<file>schema.sql</file>" in results[0]
    assert "create table users(id int);" in results[1]
    sent = json.dumps(llm.bodies[1]["messages"])
    assert "Always qualify columns" in sent
    state = await app.aget_state({"thread_id": "sk"})
    assert state.context[-1].text() == "SELECT users.id FROM users"
    assert get_active_skills(state) == ["sql-helper"]
    await app.aclose()


async def test_tool_errors_answer_the_model(llm: ScriptedLLMServer, tmp_path: Path) -> None:
    root = skills_dir(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("db password", encoding="utf-8")
    (root / "sql-helper" / "leak.txt").symlink_to(secret)
    tools = ToolNode([])
    Agent(
        model="gpt-4o", base_url=llm.base_url, tool_node=tools, skills=SkillConfig(skills_dir=root)
    )
    bad = await tools.invoke("activate_skill", {"skill_name": "nope"})
    assert bad.content[0].is_error  # refused by the enum before the tool runs
    for path, expected in [
        ("../secret.txt", "outside the skill directory"),
        ("leak.txt", "outside the skill directory"),
        ("/etc/passwd", "must be relative"),
        ("missing.sql", "not found"),
    ]:
        msg = await tools.invoke("read_skill_resource", {"skill_name": "sql-helper", "path": path})
        assert msg.content[0].is_error and expected in msg.text(), path
        assert "db password" not in msg.text()
        assert "Bundled files: schema.sql" in msg.text()  # the link is not offered


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
    llm.add(text("LGTM"), text("plain"), text("still plain"))
    await app.ainvoke(
        {"messages": ["look at this"], "state": {"SKILL_NAME": "code-review"}}, {"thread_id": "p"}
    )
    body = llm.bodies[0]
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][0]["content"].startswith(skill_content_marker("code-review"))
    assert "Point out bugs before style." in body["messages"][0]["content"]
    assert "tools" not in body  # no catalog, no activate_skill in session mode
    await app.ainvoke({"messages": ["hi"]}, {"thread_id": "other"})  # no skill named: none sent
    assert llm.bodies[1]["messages"][0]["role"] == "user"
    # a name no skill has sends nothing either (logged), as 10xGraph 0.10.3 does
    await app.ainvoke(
        {"messages": ["x"], "state": {"SKILL_NAME": "not-there"}}, {"thread_id": "bad"}
    )
    assert llm.bodies[2]["messages"][0]["role"] == "user"


async def test_hot_reload_and_configuration_errors(llm: ScriptedLLMServer, tmp_path: Path) -> None:
    root = skills_dir(tmp_path)
    tools = ToolNode([])
    agent = Agent(
        model="gpt-4o", base_url=llm.base_url, tool_node=tools, skills=SkillConfig(skills_dir=root)
    )
    state = AgentState()
    (root / "fresh").mkdir()
    (root / "fresh" / "SKILL.md").write_text(
        "---\nname: fresh\ndescription: Added later.\n---\nbody\n", encoding="utf-8"
    )
    catalog = agent.build_messages(state)[0].text()
    assert "<name>fresh</name>" in catalog  # picked up without a restart
    schema = tools.get_tool("activate_skill")
    assert schema is not None and "fresh" in schema.parameters["properties"]["skill_name"]["enum"]
    assert (
        (await tools.invoke("activate_skill", {"skill_name": "fresh"}))
        .text()
        .startswith(skill_content_marker("fresh"))
    )
    frozen_tools = ToolNode([])
    frozen = Agent(
        model="gpt-4o",
        base_url=llm.base_url,
        tool_node=frozen_tools,
        skills=SkillConfig(skills_dir=str(root), hot_reload=False, inject_trigger_table=False),
    )
    assert frozen.build_messages(state) == []  # no catalog message ...
    spec = frozen_tools.get_tool("activate_skill")
    assert spec is not None and "- fresh: Added later." in spec.description  # ... it is here
    with pytest.raises(GraphError) as info:
        Agent(model="gpt-4o", base_url=llm.base_url, skills=SkillConfig(skills_dir=str(root)))
    assert info.value.error_code == "GRAPH_001"  # skills found: on-demand needs a tool node
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = Agent(model="gpt-4o", base_url=llm.base_url, skills=SkillConfig(skills_dir=empty))
    assert nothing.build_messages(state) == []  # nothing found: no tool node needed
    with pytest.raises(GraphError):
        Agent(model="gpt-4o", base_url=llm.base_url, skills={"skills_dir": str(root)})
    disabled = Agent(model="gpt-4o", base_url=llm.base_url, skills=SkillConfig(skills_dir=None))
    assert disabled.build_messages(state) == []


async def test_named_tool_node_gets_the_skill_tools(llm: ScriptedLLMServer, tmp_path: Path) -> None:
    root = skills_dir(tmp_path)
    llm.add(tool_calls(("activate_skill", {"skill_name": "code-review"})), text("done"))
    agent = Agent(
        model="gpt-4o", base_url=llm.base_url, tool_node="TOOL", skills=SkillConfig(skills_dir=root)
    )
    tools = ToolNode([weather])
    app = react(agent, tools)
    out = await app.ainvoke({"messages": ["review this"]}, {"thread_id": "n"})
    assert [t["function"]["name"] for t in llm.bodies[0]["tools"]] == [
        "weather",
        "activate_skill",
        "read_skill_resource",
    ]
    assert any("Point out bugs" in m.text() for m in out["messages"] if m.role == "tool")


def test_registry_api(tmp_path: Path) -> None:
    root = skills_dir(tmp_path)
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text("no front matter", encoding="utf-8")
    reg = SkillsRegistry()
    found = reg.discover(root)
    assert sorted(m.name for m in found) == ["code-review", "sql-helper"]  # broken skipped
    assert any(d.level == "error" and "broken" in d.path for d in reg.diagnostics)
    assert len(reg) == 2 and "sql-helper" in reg and reg.names() == ["code-review", "sql-helper"]
    meta = reg.get("sql-helper")
    assert meta is not None and meta.tags == {"database"} and meta.priority == 10
    assert meta.triggers == ["sql", "join"] and meta.skill_file.endswith("SKILL.md")
    assert [m.name for m in reg.get_all(tags=["DATABASE"])] == ["sql-helper"]
    assert reg.load_content("sql-helper").startswith("# SQL helper")
    assert reg.load_content("unknown") == ""
    assert reg.load_resources("sql-helper") == {"schema.sql": "create table users(id int);"}
    assert reg.list_files("sql-helper") == (["schema.sql"], False)
    # the trigger table and set_skill of 10xGraph's reference page, for hand wiring
    table = reg.build_trigger_table()
    assert table.count("| sql-helper |") == 1 and table.index("code-review") < table.index("sql")
    set_skill = reg.build_set_skill_tool()
    assert set_skill("code-review").startswith("Point out bugs")
    assert set_skill("sql-helper", "schema.sql") == "create table users(id int);"
    with pytest.raises(ValueError, match="code-review, sql-helper"):
        set_skill("nope")
    with pytest.raises(ValueError, match="no file"):
        set_skill("sql-helper", "../../etc/passwd")
    assert reg.unregister("code-review") and not reg.unregister("code-review")
    assert SkillsRegistry().build_trigger_table() == ""
    assert SkillsRegistry().build_catalog() == ""


def test_a_second_directory_cannot_replace_a_skill(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for root, body in ((first, "first body"), (second, "second body")):
        (root / "code-review").mkdir(parents=True)
        (root / "code-review" / "SKILL.md").write_text(
            "---\nname: code-review\ndescription: d\n---\n" + body, encoding="utf-8"
        )
    reg = SkillsRegistry()
    reg.discover([first, second])
    assert reg.load_content("code-review") == "first body"
    assert any("shadowed" in d.message for d in reg.diagnostics)
    reg.discover(second)  # a later discovery does not replace it either
    assert reg.load_content("code-review") == "first body"
    other = SkillsRegistry()
    other.discover(second)
    meta = other.get("code-review")
    assert meta is not None
    with pytest.raises(ValueError, match="Duplicate skill name"):
        reg.register(meta)
    reg.register(meta, replace=True)
    assert reg.load_content("code-review") == "second body"


def test_a_resource_error_is_a_validation_error(tmp_path: Path) -> None:
    reg = SkillsRegistry()
    reg.discover(skills_dir(tmp_path))
    with pytest.raises(ValidationError) as info:
        reg.read_file("sql-helper", "../../x", 100)
    assert info.value.error_code == "VALIDATION_000"
    assert info.value.context == {"skill": "sql-helper", "path": "../../x"}
