"""Extraction: the article's chunking step. The last messages of a conversation become memory
records ``{content, category, is_evergreen}``, by the provider ``RUSHMEM_LLM_PROVIDER`` names:

- ``rules`` (default): offline English heuristics (see :mod:`.rules` for what they cannot do);
- ``openai``: any OpenAI-compatible chat completions endpoint (Zhipu GLM, OpenAI, ...);
- ``bedrock``: the Bedrock Converse API.

The two LLM providers are also shown the user's existing memories most related to the
conversation and may mark a fact as restating one (it is refreshed) or replacing some (they are
superseded); see :mod:`.updates` for the guards. The rules provider never is. Plug-ins: :mod:`rushmem.registry`.
"""

from __future__ import annotations

from rushmem.config import Settings
from rushmem.extraction.base import Extractor
from rushmem.extraction.records import ExtractedMemory, Extraction
from rushmem.registry import EXTRACTORS

__all__ = ["ExtractedMemory", "Extraction", "Extractor", "create_extractor"]


def create_extractor(settings: Settings) -> Extractor:
    """Build the configured extractor. Cheap: clients connect on first use."""
    extractor = EXTRACTORS.build(settings.llm_provider, settings)
    if not isinstance(extractor, Extractor):
        raise EXTRACTORS.built_wrong(settings.llm_provider, extractor, "an Extractor")
    return extractor
