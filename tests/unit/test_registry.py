"""One registry of providers (rushmem.registry): the settings take any installed provider's name
and refuse any other with the list of what is installed; a plug-in of any kind is one factory
registered under its kind's entry point group; built-in names never read the installed metadata."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from rushmem.config import Settings
from rushmem.embeddings import Embedder, create_embedder
from rushmem.embeddings.hashing import HashEmbedder
from rushmem.extraction import Extraction, Extractor, create_extractor
from rushmem.extraction.rules import RulesExtractor
from rushmem.records import ExistingMemory
from rushmem.registry import EMBEDDERS, KINDS, RERANKERS, ProviderKind
from rushmem.rerank import Reranker, create_reranker
from rushmem.service import Memory
from rushmem_contract.models import ChatMessage

INTERFACES: dict[str, type] = {"embedding_provider": Embedder, "llm_provider": Extractor, "rerank_provider": Reranker}


class PluginEmbedder(HashEmbedder):
    provider = "plugin"

    @classmethod
    def from_settings(cls, settings: Settings) -> PluginEmbedder:
        return cls(dimension=settings.embedding_dimensions or 384)


class PluginExtractor(RulesExtractor):
    provider = "plugin"

    @classmethod
    def from_settings(cls, settings: Settings) -> PluginExtractor:
        return cls(window=settings.extraction_window)


class PluginReranker(Reranker):
    provider = "plugin"
    model = "word-overlap"

    @classmethod
    def from_settings(cls, settings: Settings) -> PluginReranker:
        return cls()

    def _scores(self, query: str, documents: list[str]) -> list[float]:
        words = set(query.split())
        return [float(len(words & set(d.split()))) for d in documents]


PLUGINS = {
    "embedding_provider": (PluginEmbedder, create_embedder),
    "llm_provider": (PluginExtractor, create_extractor),
    "rerank_provider": (PluginReranker, create_reranker),
}


def installed(monkeypatch: pytest.MonkeyPatch, *registered: importlib.metadata.EntryPoint) -> list[dict[str, Any]]:
    """The installed distributions' entry points are ``registered`` alone; returns the lookups made."""
    asked: list[dict[str, Any]] = []

    def entry_points(**params: Any) -> importlib.metadata.EntryPoints:
        asked.append(params)
        return importlib.metadata.EntryPoints(registered).select(**params)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    return asked


def plugin(kind: ProviderKind, factory: str, name: str = "plugin") -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=f"{__name__}:{factory}.from_settings", group=kind.group)


@pytest.mark.parametrize("setting", sorted(KINDS))
def test_every_built_in_factory_builds_its_kinds_interface_under_the_name_it_records(setting: str) -> None:
    kind = KINDS[setting]
    for name, value in kind.built_in.items():
        factory = importlib.metadata.EntryPoint(name=name, value=value, group=kind.group).load()
        provider_class = factory.__self__  # each is a classmethod ``from_settings``
        assert issubclass(provider_class, INTERFACES[setting])
        assert provider_class.provider == name  # what fingerprints and errors show is what the setting says


@pytest.mark.parametrize("setting", sorted(PLUGINS))
def test_a_plugin_registered_under_its_kinds_group_is_accepted_and_built(
    setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider_class, create = PLUGINS[setting]
    installed(monkeypatch, plugin(KINDS[setting], provider_class.__name__))
    settings = Settings.model_validate({setting: "plugin"})
    built = create(settings)
    assert type(built) is provider_class


@pytest.mark.parametrize("setting", sorted(KINDS))
def test_an_unknown_name_is_refused_when_the_settings_load_with_what_is_installed(
    setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = KINDS[setting]
    installed(monkeypatch, plugin(kind, PLUGINS[setting][0].__name__))
    with pytest.raises(ValidationError) as err:
        Settings.model_validate({setting: "word2vec"})
    message = str(err.value)
    assert setting in message and "'word2vec' is not an installed" in message
    assert ", ".join(kind.built_in) in message
    assert f"plugin (from {__name__})" in message
    assert kind.group in message  # where a plug-in registers


def test_without_the_tools_the_refusal_says_how_to_install_the_local_model(monkeypatch: pytest.MonkeyPatch) -> None:
    installed(monkeypatch)  # the Lambda layer: no distribution registers anything
    with pytest.raises(ValidationError) as err:
        Settings(embedding_provider="word2vec")
    message = str(err.value)
    assert "installed here are hash, openai, bedrock; not installed here: local (pip install './shared'" in message
    with pytest.raises(ValidationError, match="installed here are bedrock, cohere \\(or none\\)"):
        Settings(rerank_provider="jina")


def test_built_in_names_never_read_the_installed_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold start building a provider it ships does not scan every distribution; nor does a
    name the runtime knows to install from elsewhere (``local``), which fails only when built."""
    asked = installed(monkeypatch, plugin(EMBEDDERS, "PluginEmbedder", name="hash"))
    settings = Settings(embedding_provider="hash", llm_provider="rules", rerank_provider="none")
    assert type(create_embedder(settings)) is HashEmbedder  # a built-in name wins over a plug-in's
    assert type(create_extractor(settings)) is RulesExtractor
    assert create_reranker(settings) is None
    for name in (*RERANKERS.built_in, "none"):
        Settings(rerank_provider=name)
    Settings(embedding_provider="local")
    assert asked == []


def test_before_a_snapshot_every_provider_holding_an_api_key_is_let_go_and_the_others_kept() -> None:
    service = Memory(
        Settings(
            database_url="postgresql://nobody@127.0.0.1:1/none",
            embedding_provider="hash",
            llm_provider="openai",
            openai_api_key="sk-test",
            rerank_provider="cohere",
            rerank_api_key="rk-test",
        )
    )
    embedder, extractor, reranker = service.admin.embedder, service.admin.extractor, service.admin.reranker
    assert (embedder.api_key_setting, extractor.api_key_setting) == (None, "llm_api_key")
    assert reranker is not None and reranker.api_key_setting == "rerank_api_key"
    service.admin.release_secrets()
    assert service.admin.embedder is embedder  # built from no secret
    assert service.admin.extractor is not extractor  # rebuilt with the key as it is now
    assert service.admin.reranker is not reranker


def test_an_extractor_plugin_written_against_an_earlier_hook_fails_when_its_class_is_defined() -> None:
    with pytest.raises(TypeError, match=r"_extract\(messages, ended_at, existing, instructions\)"):

        class EarlierPluginExtractor(Extractor):  # the first hook: _extract without the instructions
            provider, model = "earlier", "echo"

            def _extract(  # type: ignore[override]
                self, messages: list[ChatMessage], ended_at: dt.datetime | None, existing: Sequence[ExistingMemory]
            ) -> Extraction:
                return Extraction()
