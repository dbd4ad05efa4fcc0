"""Extraction: the article's chunking step. The last messages of a conversation become memory
records ``{content, category, is_evergreen}``, by the provider ``AGENT_MEMORY_LLM_PROVIDER`` names:

- ``rules`` (default): offline English heuristics (see :mod:`.rules` for what they cannot do);
- ``openai``: any OpenAI-compatible chat completions endpoint (Zhipu GLM, OpenAI, ...);
- ``bedrock``: the Bedrock Converse API.

The two LLM providers are also shown the user's existing memories most related to the
conversation and may mark a fact as restating one (it is refreshed) or replacing some (they are
superseded); see :mod:`.updates` for the guards. The rules provider never is.

Provider modules are imported only when selected.
"""

from __future__ import annotations

from agent_memory.config import Settings
from agent_memory.extraction.base import Extractor
from agent_memory.extraction.records import ExtractedMemory, Extraction
from agent_memory_contract.errors import ConfigurationError

__all__ = ["ExtractedMemory", "Extraction", "Extractor", "create_extractor"]


def create_extractor(settings: Settings) -> Extractor:
    """Build the configured extractor. Cheap: clients connect on first use."""
    provider = settings.llm_provider
    if provider == "rules":
        from agent_memory.extraction.rules import RulesExtractor

        return RulesExtractor(
            window=settings.extraction_window,
            max_items=settings.max_extracted_memories,
            max_chars=settings.max_memory_chars,
        )
    if provider == "openai":
        from agent_memory.extraction.openai import OpenAIChatExtractor

        return OpenAIChatExtractor.from_settings(settings)
    if provider == "bedrock":
        from agent_memory.extraction.bedrock import BedrockConverseExtractor

        return BedrockConverseExtractor.from_settings(settings)
    raise ConfigurationError(f"unknown LLM provider {provider!r}")  # pragma: no cover - Literal guards it
