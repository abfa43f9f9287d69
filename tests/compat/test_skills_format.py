"""Skill folders in the Agent Skills format as 10xGraph 0.10.3 reads them: lenient loading
with diagnostics, strict ``validate_skill``, reading bundled files safely, the activation
tools and what ``AgentSkillsMixin`` adds to a prompt in each mode."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pydantic
import pytest

from tenxgraph.core.graph.agent_internal.skills import AgentSkillsMixin, SkillsToolNodeError
from tenxgraph.core.graph.tool_node import ToolNode
from tenxgraph.core.skills import SkillConfig, SkillResourceError, SkillsRegistry, validate_skill
from tenxgraph.core.skills.activation import (
    get_active_skills,
    make_activate_skill_tool,
    make_read_skill_resource_tool,
    mark_skill_active,
    skill_content_marker,
)
from tenxgraph.core.skills.loader import load_skill, parse_skill_file, read_skill_file
from tenxgraph.core.state import AgentState, Message, ToolResult
from tenxgraph.utils import CallbackManager, InvocationType

pytestmark = pytest.mark.anyio


def make_skill(root: Path, folder: str, front: str, body: str = "Do the thing.") -> Path:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n", encoding="utf-8")
    return d


def test_config_takes_one_or_many_directories(tmp_path: Path) -> None:
    assert SkillConfig().skill_dirs == []
    assert SkillConfig(skills_dir=tmp_path).skill_dirs == [str(tmp_path)]
    assert SkillConfig(skills_dir=[" a ", tmp_path]).skill_dirs == ["a", str(tmp_path)]
    # the reference page's field name is an alias of inject_catalog
    assert SkillConfig(inject_trigger_table=False).inject_catalog is False
    for bad in ("", [], [""], 3):
        with pytest.raises(pydantic.ValidationError):
            SkillConfig(skills_dir=bad)
    with pytest.raises(pydantic.ValidationError):
        SkillConfig(max_resource_bytes=-1)
    with pytest.raises(pydantic.ValidationError):
        SkillConfig(unknown_option=True)  # type: ignore[call-arg]


def test_loading_is_lenient_and_says_why(tmp_path: Path) -> None:
    d = make_skill(
        tmp_path,
        "folder",
        "name: Mixed_Case\ndescription: Summarise: long texts\ntags: [x]\n"
        'metadata:\n  priority: 7\n  tags: "A, b"',
    )
    meta, diags = load_skill(d)
    assert meta is not None and meta.name == "Mixed_Case" and meta.priority == 7
    assert meta.description == "Summarise: long texts"  # recovered by quoting
    assert meta.tags == {"a", "b"}  # from metadata only; the top-level list is not used
    text = " | ".join(d.message for d in diags)
    for part in ("lowercase", "invalid characters", "must match", "Move tags", "quoting"):
        assert part in text
    assert all(x.level == "warning" for x in diags)
    broken = make_skill(tmp_path, "broken", "description: no name here")
    meta, diags = load_skill(broken)
    assert meta is None and diags[-1].message.startswith("Skipped")


def test_parse_reports_instead_of_raising(tmp_path: Path) -> None:
    f = tmp_path / "SKILL.md"
    f.write_text("---\nname: [oops\n---\nbody", encoding="utf-8")
    parsed = parse_skill_file(f)
    assert parsed.frontmatter is None and parsed.body == "body"
    assert parsed.diagnostics[0].level == "error"
    assert parse_skill_file(tmp_path / "absent.md").frontmatter is None


def test_validate_is_strict(tmp_path: Path) -> None:
    good = make_skill(tmp_path, "tidy", "name: tidy\ndescription: Tidy up.\nlicense: MIT")
    assert validate_skill(good) == []
    bad = make_skill(tmp_path, "messy", "name: Messy\ndescription: d\nowner: me\nlicense: 3")
    messages = [str(d) for d in validate_skill(bad)]
    assert all(m.startswith("error: ") for m in messages)
    assert any("owner" in m for m in messages) and any("license" in m for m in messages)
    assert any("lowercase" in m for m in messages)


def test_reading_bundled_files_stays_inside(tmp_path: Path) -> None:
    d = make_skill(tmp_path / "skills", "kit", "name: kit\ndescription: d")
    (d / "notes.md").write_text("n" * 50, encoding="utf-8")
    (d / "blob.bin").write_bytes(b"\x00\x01\x02")
    (d / "sub").mkdir()
    (d / "sub" / "a.txt").write_text("a", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("private", encoding="utf-8")
    (d / "link.txt").symlink_to(tmp_path / "outside.txt")
    meta, _ = load_skill(d)
    assert meta is not None
    assert read_skill_file(meta, "notes.md", 1000) == "n" * 50
    assert "truncated: showing the first 5 of 50 bytes" in read_skill_file(meta, "notes.md", 5)
    assert "binary file" in read_skill_file(meta, "blob.bin", 1000)
    assert "sub/a.txt" in read_skill_file(meta, "sub", 1000)
    for path in ("link.txt", "../outside.txt", "/tmp", "D:\\x", " ", "nope.txt"):
        with pytest.raises(SkillResourceError) as info:
            read_skill_file(meta, path, 1000)
        assert "private" not in str(info.value)
    reg = SkillsRegistry()
    reg.discover(tmp_path / "skills")
    assert reg.list_files("kit") == (["blob.bin", "notes.md", "sub/a.txt"], False)


def test_activation_records_and_does_not_repeat(tmp_path: Path) -> None:
    make_skill(tmp_path, "alpha", "name: alpha\ndescription: First.", body="Alpha rules.")
    reg = SkillsRegistry()
    reg.discover(tmp_path)
    activate = make_activate_skill_tool(
        reg, SkillConfig(), embed_catalog=False, can_read_files=False
    )
    state = AgentState()
    first = activate("alpha", state=state)
    assert isinstance(first, str) and first.startswith(skill_content_marker("alpha"))
    assert get_active_skills(state) == ["alpha"]
    state.context.append(Message.text_message(first, role="tool"))
    assert "already active" in str(activate("alpha", state=state))
    missing = activate("beta")
    assert isinstance(missing, ToolResult) and missing.is_error and "alpha" in missing.message
    read = make_read_skill_resource_tool(reg, SkillConfig())
    result = read("alpha", "../x")
    assert isinstance(result, ToolResult) and result.is_error


async def test_skill_tools_run_skill_callbacks_and_errors_are_marked(tmp_path: Path) -> None:
    make_skill(tmp_path, "alpha", "name: alpha\ndescription: First.")
    reg = SkillsRegistry()
    reg.discover(tmp_path)
    node = ToolNode(
        [make_activate_skill_tool(reg, SkillConfig(), embed_catalog=False, can_read_files=False)]
    )
    seen: list[str] = []

    def before(ctx: object, data: object) -> object:
        seen.append(str(getattr(ctx, "invocation_type", "")))
        return data

    manager = CallbackManager()
    manager.register_before_invoke(InvocationType.SKILL, before)
    ok = await node.invoke("activate_skill", {"skill_name": "alpha"}, callback_manager=manager)
    assert seen == ["skill"] and not ok.content[0].is_error
    empty = make_skill(tmp_path, "empty", "name: empty\ndescription: d", body="")
    reg.discover(empty.parent)
    tool = make_activate_skill_tool(reg, SkillConfig(), embed_catalog=False, can_read_files=False)
    failed = await ToolNode([tool]).invoke("activate_skill", {"skill_name": "empty"})
    assert failed.content[0].is_error and "no instructions" in failed.text()


def test_mixin_modes(tmp_path: Path) -> None:
    d = make_skill(tmp_path, "alpha", "name: alpha\ndescription: First.", body="Alpha rules.")
    (d / "ref.md").write_text("r", encoding="utf-8")

    mixin = AgentSkillsMixin()
    with pytest.raises(SkillsToolNodeError) as info:
        mixin._setup_skills(SkillConfig(skills_dir=tmp_path))
    assert info.value.error_code == "GRAPH_001"

    node = ToolNode([])
    on_demand = AgentSkillsMixin()
    on_demand._tool_node = node
    on_demand._setup_skills(SkillConfig(skills_dir=tmp_path))
    assert node.tool_names == ["activate_skill", "read_skill_resource"]
    state = AgentState()
    mark_skill_active(state, "alpha")  # activated, but its text left the conversation
    prompts = on_demand._build_skill_prompts(state, [{"role": "system", "content": "Hi"}])
    assert prompts[0] == {"role": "system", "content": "Hi"}
    assert "<available_skills>" in prompts[1]["content"]
    assert prompts[2]["content"].startswith(skill_content_marker("alpha"))

    session = AgentSkillsMixin()
    session._setup_skills(SkillConfig(skills_dir=tmp_path, mode="session", preload_from="who"))
    assert session._build_skill_prompts(SimpleNamespace(who=""), []) == []
    assert session._build_skill_prompts(SimpleNamespace(who="zzz"), []) == []
    (text,) = session._build_skill_prompts(SimpleNamespace(who="alpha"), [])
    assert "Alpha rules." in text["content"] and "<file>ref.md</file>" in text["content"]
    assert "read_skill_resource(" not in text["content"]  # no tool node to read it with
