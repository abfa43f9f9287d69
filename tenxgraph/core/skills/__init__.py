"""Skills: folders holding a ``SKILL.md`` of instructions an ``Agent`` hands to its model
(10xGraph 0.10.3's skills, in the Agent Skills format).

``Agent(skills=SkillConfig(skills_dir=...))``; see ``docs/how-to/skills.md``,
:mod:`tenxgraph.core.skills.loader`, :mod:`tenxgraph.core.skills.registry` and
:mod:`tenxgraph.core.skills.activation`.
"""

from __future__ import annotations

from .loader import SkillResourceError, discover_skills, load_skill, parse_skill_file
from .models import SkillConfig, SkillDiagnostic, SkillMeta
from .registry import SkillsRegistry
from .validation import validate_skill

__all__ = [
    "SkillConfig",
    "SkillDiagnostic",
    "SkillMeta",
    "SkillResourceError",
    "SkillsRegistry",
    "discover_skills",
    "load_skill",
    "parse_skill_file",
    "validate_skill",
]
