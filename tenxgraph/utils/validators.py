"""Input validators: prompt-injection screening and message-structure checks.

Register them on a ``CallbackManager`` (``register_input_validator``, or all at once with
:func:`register_default_validators`); an ``Agent`` runs them on the newest user messages before
it calls its model. A refusal raises :class:`ValidationError` (``VALIDATION_002``), which the
caller of ``invoke`` / ``ainvoke`` / ``stream`` receives.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Iterable
from typing import Any

from tenxgraph.core.exceptions import ValidationError as _TenxValidationError
from tenxgraph.core.state import Message, TextBlock

from .callbacks import BaseValidator, CallbackManager

__all__ = [
    "MessageContentValidator",
    "PromptInjectionValidator",
    "ValidationError",
    "register_default_validators",
]

logger = logging.getLogger(__name__)


class ValidationError(_TenxValidationError):
    """A validator refused the input (error code ``VALIDATION_002``).

    Args:
        message: why.
        violation_type: the category (``"injection_pattern"``, ``"suspicious_keyword"``,
            ``"length_exceeded"``, ``"encoding_attack"``, ``"invalid_role"``,
            ``"too_many_blocks"``, or a custom validator's own).
        details: extra facts (matched pattern, input length...); never put into logs by
            tenxgraph. ``context`` holds only ``violation_type``.

    Attributes:
        violation_type (str): as given.
        details (dict): as given.
    """

    default_code = "VALIDATION_002"

    def __init__(
        self, message: str, violation_type: str = "policy", details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message, context={"violation_type": violation_type})
        self.violation_type = violation_type
        self.details: dict[str, Any] = dict(details or {})


#: Regular expressions of well-known injection phrasings (case-insensitive), after OWASP's
#: LLM01:2025 categories: instruction override, role manipulation, prompt extraction,
#: jailbreak personas, template injection, delimiter confusion.
DEFAULT_PATTERNS: tuple[str, ...] = (
    r"\b(ignore|disregard|forget|override)\b.{0,30}\b(previous|prior|above|earlier|all|your)\b.{0,20}\b(instructions?|rules|prompts?|directions)\b",
    r"\byou are now\b.{0,40}\b(dan|unrestricted|jailbroken|admin|developer mode|no longer)\b",
    r"\bact as (an? )?(admin|administrator|root|system|developer)\b",
    r"\b(show|reveal|print|repeat|tell me|output)\b.{0,30}\b(system prompt|hidden prompt|initial instructions|your instructions)\b",
    r"\b(dan|apophis|stan|dude)\b.{0,20}\b(mode|prompt|jailbreak)\b",
    r"\bdo anything now\b",
    r"\{\{.*?\}\}|\$\{.*?\}|\{%.*?%\}",
    r"-{2,}\s*end of (instructions|system prompt|prompt)\s*-{2,}",
    r"<\|?(im_start|im_end|system)\|?>|\[/?INST\]|###\s*system\s*:",
    r"[^\w\s]{30,}",
)

#: Words that flag a message when combined with an instruction word (strict mode refuses).
DEFAULT_KEYWORDS: tuple[str, ...] = ("jailbreak", "bypass your", "without restrictions")

_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")


def _texts(msg: Message) -> list[TextBlock]:
    return [b for b in msg.content if isinstance(b, TextBlock)]


class PromptInjectionValidator(BaseValidator):
    """Screens user messages for prompt-injection attempts.

    Args:
        strict_mode: ``True`` (default) raises :class:`ValidationError`; ``False`` logs a
            warning (logger ``tenxgraph.utils.validators``, category only) and replaces each
            match with ``"[filtered]"`` in the copy sent to the model (the stored message is
            untouched).
        max_length: longest accepted text of one message, in characters.
        blocked_patterns: more regular expressions to refuse (added to
            :data:`DEFAULT_PATTERNS`).
        suspicious_keywords: more phrases to refuse (added to :data:`DEFAULT_KEYWORDS`).

    Raises:
        ValueError: ``max_length`` < 1 or a pattern does not compile.
    """

    def __init__(
        self,
        strict_mode: bool = True,
        max_length: int = 10000,
        blocked_patterns: Iterable[str] | None = None,
        suspicious_keywords: Iterable[str] | None = None,
    ) -> None:
        if max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {max_length}")
        self.strict_mode = strict_mode
        self.max_length = max_length
        try:
            self.patterns = [
                re.compile(p, re.IGNORECASE | re.DOTALL)
                for p in (*DEFAULT_PATTERNS, *(blocked_patterns or ()))
            ]
        except re.error as exc:
            raise ValueError(f"a blocked pattern does not compile: {exc}") from None
        self.keywords = [k.lower() for k in (*DEFAULT_KEYWORDS, *(suspicious_keywords or ()))]

    def _violation(self, text: str) -> tuple[str, dict[str, Any], str | None] | None:
        if len(text) > self.max_length:
            return "length_exceeded", {"length": len(text), "max_length": self.max_length}, None
        if _INVISIBLE.search(text):
            return "encoding_attack", {"kind": "invisible characters"}, _INVISIBLE.pattern
        for run in _BASE64_RUN.findall(text):
            try:
                decoded = base64.b64decode(run, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                continue
            if self._violation(decoded) is not None:
                return "encoding_attack", {"kind": "base64 payload"}, re.escape(run)
        for pattern in self.patterns:
            if pattern.search(text):
                return "injection_pattern", {"pattern": pattern.pattern}, pattern.pattern
        low = text.lower()
        for word in self.keywords:
            if word in low:
                return "suspicious_keyword", {"keyword": word}, re.escape(word)
        return None

    async def validate(self, messages: list[Message]) -> bool:
        """Check the user messages of ``messages`` (class docstring).

        Raises:
            ValidationError: ``VALIDATION_002`` in strict mode, on the first violation.
        """
        for msg in messages:
            if msg.role != "user":
                continue
            for block in _texts(msg):
                found = self._violation(block.text)
                if found is None:
                    continue
                kind, details, pattern = found
                if self.strict_mode:
                    raise ValidationError(
                        f"the message was refused by the prompt-injection check ({kind})",
                        kind,
                        details,
                    )
                logger.warning(
                    "prompt-injection check flagged a message (%s); it was sanitised", kind
                )
                if kind == "length_exceeded":
                    block.text = block.text[: self.max_length]
                elif pattern is not None:
                    block.text = re.sub(
                        pattern, "[filtered]", block.text, flags=re.IGNORECASE | re.DOTALL
                    )
        return True


class MessageContentValidator(BaseValidator):
    """Checks message structure: allowed roles and a bound on content blocks.

    Args:
        allowed_roles: roles a validated message may have (default ``user``, ``assistant``,
            ``system``, ``tool``).
        max_content_blocks: most content blocks in one message (>= 1).

    Raises:
        ValueError: ``max_content_blocks`` < 1.
    """

    def __init__(
        self,
        allowed_roles: Iterable[str] | None = None,
        max_content_blocks: int = 50,
    ) -> None:
        if max_content_blocks < 1:
            raise ValueError(f"max_content_blocks must be >= 1, got {max_content_blocks}")
        self.allowed_roles = set(allowed_roles or ("user", "assistant", "system", "tool"))
        self.max_content_blocks = max_content_blocks

    async def validate(self, messages: list[Message]) -> bool:
        """Check each message (class docstring).

        Raises:
            ValidationError: ``VALIDATION_002`` (``invalid_role`` or ``too_many_blocks``).
        """
        for msg in messages:
            if msg.role not in self.allowed_roles:
                raise ValidationError(
                    f"messages with role {msg.role!r} are not accepted",
                    "invalid_role",
                    {"role": msg.role, "allowed": sorted(self.allowed_roles)},
                )
            if len(msg.content) > self.max_content_blocks:
                raise ValidationError(
                    f"a message has {len(msg.content)} content blocks, more than "
                    f"{self.max_content_blocks}",
                    "too_many_blocks",
                    {"blocks": len(msg.content), "max": self.max_content_blocks},
                )
        return True


def register_default_validators(manager: CallbackManager) -> None:
    """Register a strict :class:`PromptInjectionValidator` and a
    :class:`MessageContentValidator` on ``manager``.

    Args:
        manager: the graph's callback manager.
    """
    manager.register_input_validator(PromptInjectionValidator(strict_mode=True))
    manager.register_input_validator(MessageContentValidator())
