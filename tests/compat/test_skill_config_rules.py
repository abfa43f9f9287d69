"""``SkillConfig.preload_from`` names a state field: trimmed, an identifier, required in
session mode (the rules 10xGraph 0.10.3 applies)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from tenxgraph.core.skills import SkillConfig


def test_spaces_are_dropped() -> None:
    assert SkillConfig(preload_from="  active_skill ").preload_from == "active_skill"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "preload_from must not be an empty string"),
        ("   ", "preload_from must not be an empty string"),
        ("active-skill", "must be a state field name"),
        ("1st", "must be a state field name"),
    ],
)
def test_bad_names_are_refused(value: str, message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        SkillConfig(preload_from=value)


def test_session_mode_needs_it(tmp_path: Path) -> None:
    with pytest.raises(pydantic.ValidationError, match="preload_from must be set"):
        SkillConfig(skills_dir=str(tmp_path), mode="session")
