"""create_embedder builds in the providers Lambda runs and finds the others (the offline ``local``
model, which lives in the tools) through the entry point group ``rushmem.embedders``."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import numpy as np
import pytest

from rushmem.config import Settings
from rushmem.embeddings import ENTRY_POINT_GROUP, create_embedder
from rushmem.embeddings.hashing import HashEmbedder
from rushmem_contract.errors import ConfigurationError


def registry_without_the_tools(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Entry points as an installation without the tools (the Lambda layer) has them: none of ours.
    Returns the groups asked for."""
    asked: list[str] = []

    def entry_points(**params: Any) -> importlib.metadata.EntryPoints:
        asked.append(params.get("group", ""))
        return importlib.metadata.EntryPoints(())

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    return asked


def test_without_the_tools_local_is_a_configuration_error_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = registry_without_the_tools(monkeypatch)
    with pytest.raises(ConfigurationError) as err:
        create_embedder(Settings(embedding_provider="local"))
    message = str(err.value)
    assert "'local'" in message
    assert "pip install './shared' '.[local]'" in message
    assert "hash, openai, bedrock" in message  # what would work instead
    assert asked == [ENTRY_POINT_GROUP]


def test_a_built_in_provider_never_reads_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = registry_without_the_tools(monkeypatch)
    embedder = create_embedder(Settings(embedding_provider="hash", embedding_dimensions=64))
    assert isinstance(embedder, HashEmbedder) and embedder.dimension == 64
    assert asked == []


def test_a_registered_factory_that_builds_no_embedder_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registered = importlib.metadata.EntryPoint(name="local", value="builtins:str", group=ENTRY_POINT_GROUP)
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda **params: importlib.metadata.EntryPoints([registered])
    )
    with pytest.raises(ConfigurationError, match="'local' built a str, not an Embedder"):
        create_embedder(Settings(embedding_provider="local"))


def test_hash_embedder_is_deterministic_unit_and_lexical() -> None:
    embedder = HashEmbedder(dimension=64)
    a, b, c = embedder.embed(["TypeScript editor", "typescript EDITOR", "ramen in Lisbon"])
    assert np.allclose(a, b)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    assert float(a @ c) < float(a @ b)
    assert np.linalg.norm(embedder.embed_query("!!!")) == pytest.approx(1.0, abs=1e-6)
