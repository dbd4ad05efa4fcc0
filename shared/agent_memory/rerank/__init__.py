"""Rerank providers: the best fused candidates of a recall scored again by a cross-encoder, chosen by
``AGENT_MEMORY_RERANK_PROVIDER``:

- ``none`` (default): no reranker, the fused order stands;
- ``bedrock``: the Bedrock Rerank API (bedrock-agent-runtime ``rerank``: amazon.rerank-v1:0,
  cohere.rerank-v3-5:0);
- ``cohere``: any Cohere-compatible ``POST {base}/rerank`` (Cohere, Jina, Voyage, vLLM, ...).

A reranker never fails a recall: a timeout or an error is logged and counted, and the recall
keeps the fused order (see :class:`.base.Reranker`). How its scores combine with the rest of the
ranking is :func:`agent_memory.recall.ranking.rank_candidates`'s business.

Provider modules are imported only when selected.
"""

from __future__ import annotations

from agent_memory.config import Settings
from agent_memory.rerank.base import Reranker
from agent_memory_contract.errors import ConfigurationError

__all__ = ["Reranker", "create_reranker"]


def create_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or None. Cheap: clients connect on first use."""
    provider = settings.rerank_provider
    if provider == "none":
        return None
    if provider == "cohere":
        from agent_memory.rerank.cohere import CohereReranker

        return CohereReranker.from_settings(settings)
    if provider == "bedrock":
        from agent_memory.rerank.bedrock import BedrockReranker

        return BedrockReranker.from_settings(settings)
    raise ConfigurationError(f"unknown rerank provider {provider!r}")  # pragma: no cover - Literal guards it
