"""Embedding providers behind one interface, chosen by ``AGENT_MEMORY_EMBEDDING_PROVIDER``.

Provider modules are imported only when selected, so a Lambda that uses Bedrock never
imports torch and a laptop never needs boto3 credentials.
"""

from __future__ import annotations

from agent_memory.config import Settings
from agent_memory.embeddings.base import Embedder
from agent_memory_contract.errors import ConfigurationError

__all__ = ["Embedder", "create_embedder"]


def create_embedder(settings: Settings) -> Embedder:
    """Build the configured embedder. Cheap: models and clients load on first use."""
    provider = settings.embedding_provider
    if provider == "hash":
        from agent_memory.embeddings.hashing import HashEmbedder

        return HashEmbedder(dimension=settings.embedding_dimensions or 384)
    if provider == "local":
        from agent_memory.embeddings.local import LocalEmbedder

        return LocalEmbedder(model=settings.embedding_model, batch_size=settings.embedding_batch_size)
    if provider == "openai":
        from agent_memory.embeddings.openai import OpenAIEmbedder

        return OpenAIEmbedder.from_settings(settings)
    if provider == "bedrock":
        from agent_memory.embeddings.bedrock import BedrockEmbedder

        return BedrockEmbedder.from_settings(settings)
    raise ConfigurationError(f"unknown embedding provider {provider!r}")  # pragma: no cover - Literal guards it
