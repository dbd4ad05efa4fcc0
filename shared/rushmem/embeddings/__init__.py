"""Embedding providers behind one interface, chosen by ``RUSHMEM_EMBEDDING_PROVIDER``: ``hash``,
``openai`` and ``bedrock`` built in, any other a plug-in (:mod:`rushmem.registry`), such as the offline
model ``local`` the tools register (rushmem_tools.embedders), which Lambda never has.
"""

from __future__ import annotations

from rushmem.config import Settings
from rushmem.embeddings.base import Embedder
from rushmem.registry import EMBEDDERS

__all__ = ["ENTRY_POINT_GROUP", "Embedder", "create_embedder"]

ENTRY_POINT_GROUP = EMBEDDERS.group


def create_embedder(settings: Settings) -> Embedder:
    """Build the configured embedder. Cheap: models and clients load on first use."""
    embedder = EMBEDDERS.build(settings.embedding_provider, settings)
    if not isinstance(embedder, Embedder):
        raise EMBEDDERS.built_wrong(settings.embedding_provider, embedder, "an Embedder")
    return embedder
