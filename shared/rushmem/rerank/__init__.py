"""Rerank providers: the best fused candidates of a recall scored again by a cross-encoder, chosen by
``RUSHMEM_RERANK_PROVIDER``:

- ``none`` (default): no reranker, the fused order stands;
- ``bedrock``: the Bedrock Rerank API (bedrock-agent-runtime ``rerank``: amazon.rerank-v1:0,
  cohere.rerank-v3-5:0);
- ``cohere``: any Cohere-compatible ``POST {base}/rerank`` (Cohere, Jina, Voyage, vLLM, ...).

A reranker never fails a recall: a timeout or an error is logged and counted, and the recall
keeps the fused order (see :class:`.base.Reranker`). How its scores combine with the rest of the
ranking is :func:`rushmem.recall.ranking.rank_candidates`'s business. Plug-ins: :mod:`rushmem.registry`.
"""

from __future__ import annotations

from rushmem.config import Settings
from rushmem.registry import RERANKERS
from rushmem.rerank.base import Reranker

__all__ = ["Reranker", "create_reranker"]


def create_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or None. Cheap: clients connect on first use."""
    if settings.rerank_provider == RERANKERS.off:
        return None
    reranker = RERANKERS.build(settings.rerank_provider, settings)
    if not isinstance(reranker, Reranker):
        raise RERANKERS.built_wrong(settings.rerank_provider, reranker, "a Reranker")
    return reranker
