"""Amazon Titan Text Embeddings V2 on Bedrock (``amazon.titan-embed-text-v2:0``).

Titan takes one text per InvokeModel call, so a batch is sent as concurrent calls.
Retries on throttling and 5xx are botocore's own (standard mode), bounded by max_retries.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from agent_memory.config import Settings
from agent_memory.embeddings.base import Embedder
from agent_memory.errors import ConfigurationError, ProviderError
from agent_memory.providers.bedrock import bedrock_runtime_client, describe_client_error

DEFAULT_MODEL = "amazon.titan-embed-text-v2:0"
TITAN_V2_DIMENSIONS = (256, 512, 1024)
MAX_PARALLEL_CALLS = 8


class BedrockEmbedder(Embedder):
    provider = "bedrock"

    def __init__(self, client: Any, model: str = DEFAULT_MODEL, dimensions: int | None = None) -> None:
        dimensions = dimensions or 1024
        if model.startswith("amazon.titan-embed-text-v2") and dimensions not in TITAN_V2_DIMENSIONS:
            raise ConfigurationError(
                f"Titan Text Embeddings V2 supports dimensions {TITAN_V2_DIMENSIONS}, not {dimensions}"
            )
        self._client = client
        self.model = model
        self.dimension = dimensions
        self.batch_size = 64

    @classmethod
    def from_settings(cls, settings: Settings, client: Any = None) -> BedrockEmbedder:
        return cls(
            client or bedrock_runtime_client(settings),
            model=settings.embedding_model or DEFAULT_MODEL,
            dimensions=settings.embedding_dimensions,
        )

    def _embed_one(self, text: str) -> list[float]:
        from botocore.exceptions import BotoCoreError, ClientError

        body = json.dumps({"inputText": text, "dimensions": self.dimension, "normalize": True})
        try:
            response = self._client.invoke_model(
                modelId=self.model, body=body, contentType="application/json", accept="application/json"
            )
            payload = json.loads(response["body"].read())
        except (ClientError, BotoCoreError) as exc:
            message, retryable = describe_client_error(exc)
            raise ProviderError("bedrock embeddings", f"{self.model}: {message}", retryable=retryable) from exc
        embedding = payload.get("embedding")
        if not isinstance(embedding, list):
            raise ProviderError("bedrock embeddings", f"{self.model} returned no 'embedding'")
        return embedding

    def _embed_batch(self, texts: list[str]) -> npt.ArrayLike:
        if len(texts) == 1:
            return np.asarray([self._embed_one(texts[0])], dtype=np.float32)
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_CALLS, len(texts))) as pool:
            return np.asarray(list(pool.map(self._embed_one, texts)), dtype=np.float32)
