"""Which provider serves a model, and the adapter that speaks to it.

``Agent(provider=...)`` takes ``"openai"``, ``"google"`` or ``"anthropic"``; without it the
provider is read from the model name as 10xGraph does: a ``"google/"``, ``"gemini/"``,
``"anthropic/"`` or ``"openai/"`` prefix, else ``gemini-*`` -> google, ``claude-*`` ->
anthropic, anything else -> openai (any OpenAI-compatible server).
"""

from __future__ import annotations

from typing import Any

from tenxgraph.models.base import ChatModel

__all__ = ["PROVIDERS", "infer_provider", "make_provider_model"]

#: the providers ``Agent(provider=...)`` accepts.
PROVIDERS = ("openai", "google", "anthropic")
_PREFIXES = {"google": "google", "gemini": "google", "anthropic": "anthropic", "openai": "openai"}


def infer_provider(model: str) -> str:
    """The provider of a model name (see the module docstring).

    Args:
        model: e.g. ``"gemini-2.5-flash"``, ``"anthropic/claude-sonnet-4-5"``, ``"gpt-4o"``.

    Returns:
        ``"openai"``, ``"google"`` or ``"anthropic"``.
    """
    head, sep, rest = model.partition("/")
    if sep and head.lower() in _PREFIXES:
        return _PREFIXES[head.lower()]
    name = (rest if sep else model).lower()
    if name.startswith(("gemini", "models/gemini")):
        return "google"
    if name.startswith("claude"):
        return "anthropic"
    return "openai"


def make_provider_model(
    provider: str,
    model: str,
    *,
    base_url: str | None,
    api_key: str | None,
    timeout_s: float | None,
    max_retries: int,
    params: dict[str, Any],
    use_vertex_ai: bool = False,
    backoff: dict[str, Any] | None = None,
) -> ChatModel:
    """Build the Google or Anthropic adapter (OpenAI models are built by ``Agent``).

    Args:
        provider: ``"google"`` or ``"anthropic"``.
        model: the model name.
        base_url: another endpoint, or ``None`` (the SDK's default / environment).
        api_key: the key, or ``None`` (the SDK reads its environment variable).
        timeout_s: per-request timeout in seconds, or ``None``.
        max_retries: retries of retryable errors (Anthropic's SDK retries itself; Gemini's
            are retried by ``GoogleModel`` as ``OpenAICompatModel`` retries).
        params: default request parameters.
        use_vertex_ai: Google only: call Gemini through Vertex AI.
        backoff: Google only: ``GoogleModel``'s ``retry_statuses``, ``initial_delay_s``,
            ``backoff_factor`` and ``max_delay_s`` (default: its defaults).

    Returns:
        The adapter.

    Raises:
        ValueError: ``provider`` is neither ``"google"`` nor ``"anthropic"``.
        ModelError: ``MODEL_001`` when the provider's SDK is not installed.
    """
    if provider == "google":
        from tenxgraph.models.google import GoogleModel

        return GoogleModel(
            model,
            api_key=api_key,
            base_url=base_url,
            timeout_s=timeout_s,
            use_vertex_ai=use_vertex_ai,
            max_retries=max_retries,
            **(backoff or {}),
            **params,
        )
    if provider == "anthropic":
        from tenxgraph.models.anthropic import AnthropicModel

        return AnthropicModel(
            model,
            api_key=api_key,
            base_url=base_url,
            timeout_s=timeout_s,
            max_retries=max_retries,
            **params,
        )
    raise ValueError(f"no adapter for provider {provider!r}; use one of {PROVIDERS}")
