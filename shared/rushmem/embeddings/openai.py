"""Any OpenAI-compatible ``/embeddings`` endpoint: OpenAI, Zhipu ``embedding-3`` (as in the article),
... (Zhipu's settings: docs/configuration.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from rushmem.config import Settings
from rushmem.embeddings.base import Embedder
from rushmem.providers.aws import openai_api_key
from rushmem.providers.http import OpenAICompatClient
from rushmem.usage import record_usage
from rushmem_contract.errors import ConfigurationError, ProviderError

if TYPE_CHECKING:
    import httpx

DEFAULT_MODEL = "text-embedding-3-small"
# Output sizes when no "dimensions" is requested.
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "embedding-3": 2048,
    "embedding-2": 1024,
}


class OpenAIEmbedder(Embedder):
    provider = "openai"
    api_key_setting = "openai_api_key"

    def __init__(
        self,
        client: OpenAICompatClient,
        model: str = DEFAULT_MODEL,
        dimensions: int | None = None,
        batch_size: int = 64,
    ) -> None:
        self._client = client
        self.model = model
        self._request_dimensions = dimensions
        known = KNOWN_DIMENSIONS.get(model)
        if dimensions is None and known is None:
            raise ConfigurationError(
                f"embedding model {model!r} is not one whose size is known: set RUSHMEM_EMBEDDING_DIMENSIONS"
            )
        self.dimension = dimensions or known or 0
        self.batch_size = batch_size

    @classmethod
    def from_settings(cls, settings: Settings, transport: httpx.BaseTransport | None = None) -> OpenAIEmbedder:
        client = OpenAICompatClient.for_settings(
            "openai embeddings", settings.openai_base_url, openai_api_key(settings), settings, transport
        )
        return cls(
            client,
            model=settings.embedding_model or DEFAULT_MODEL,
            dimensions=settings.embedding_dimensions,
            batch_size=settings.embedding_batch_size,
        )

    def _embed_batch(self, texts: list[str]) -> npt.ArrayLike:
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self._request_dimensions is not None:
            payload["dimensions"] = self._request_dimensions
        body = self._client.post_json("embeddings", payload)
        data = body.get("data")
        if not isinstance(data, list) or len(data) != len(texts):
            count = len(data) if isinstance(data, list) else "no"
            raise self._error(f"returned {count} vectors for {len(texts)} inputs")
        if not all(isinstance(item, dict) for item in data):
            raise self._error("returned items that are not objects")
        indices = [item.get("index") for item in data]
        if any(index is not None for index in indices):  # items may come in any order: "index" places them
            if sorted(i for i in indices if type(i) is int) != list(range(len(texts))):
                raise self._error(f"returned indices that are not 0..{len(texts) - 1} once each")
            data = sorted(data, key=lambda item: int(item["index"]))
        try:
            vectors = np.asarray([item["embedding"] for item in data], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:  # missing, not numbers, or rows of different sizes
            raise self._error("returned items without a numeric 'embedding' of one size") from exc
        if vectors.shape != (len(texts), self.dimension):
            raise self._error(f"returned vectors of shape {vectors.shape[1:]}, expected ({self.dimension},)")
        usage = body.get("usage")
        if isinstance(usage, dict):
            tokens = usage.get("prompt_tokens", usage.get("total_tokens"))
            if isinstance(tokens, int) and tokens > 0:
                record_usage("embedding", self.fingerprint, input_tokens=tokens)
        return vectors

    def _error(self, problem: str) -> ProviderError:
        return ProviderError(self._client.provider, f"{self.model}: /embeddings {problem}")
