"""Skills: ``SKILL.md`` instruction files an ``Agent`` hands to its model (10xGraph's skills).

``Agent(skills=SkillConfig(skills_dir=...))``; see :mod:`tenxgraph.core.skills.models` and
:mod:`tenxgraph.core.skills.registry`.
"""

from __future__ import annotations

from .models import SkillConfig, SkillMeta
from .registry import SkillsRegistry, parse_skill_file

__all__ = ["SkillConfig", "SkillMeta", "SkillsRegistry", "parse_skill_file"]
