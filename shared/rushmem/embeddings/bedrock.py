"""Amazon Titan Text Embeddings V2 on Bedrock (``amazon.titan-embed-text-v2:0``).

Titan takes one text per InvokeModel call, so a batch (``embedding_batch_size`` texts) is sent
as concurrent calls sharing one retry budget; each call is retried under the shared policy
(:mod:`rushmem.providers.retry`).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from rushmem.config import Settings
from rushmem.embeddings.base import Embedder
from rushmem.providers.bedrock import bedrock_runtime_client, call_bedrock
from rushmem.providers.lifecycle import DEFAULT_EMBEDDING_MODEL
from rushmem.providers.retry import RetryPolicy
from rushmem.usage import record_usage
from rushmem_contract.errors import ConfigurationError, ProviderError

TITAN_V2_DIMENSIONS = (256, 512, 1024)
MAX_PARALLEL_CALLS = 8
PROVIDER = "bedrock embeddings"


class BedrockEmbedder(Embedder):
    provider = "bedrock"
    texts_per_request = 1

    def __init__(
        self,
        client: Any,
        model: str = DEFAULT_EMBEDDING_MODEL,
        dimensions: int | None = None,
        *,
        batch_size: int = Embedder.batch_size,
        retry: RetryPolicy | None = None,
    ) -> None:
        dimensions = dimensions or 1024
        if model.startswith("amazon.titan-embed-text-v2") and dimensions not in TITAN_V2_DIMENSIONS:
            raise ConfigurationError(
                f"Titan Text Embeddings V2 supports dimensions {TITAN_V2_DIMENSIONS}, not {dimensions}"
            )
        self._client = client
        self.model = model
        self.dimension = dimensions
        self.batch_size = batch_size
        self._retry = retry or RetryPolicy()

    @classmethod
    def from_settings(cls, settings: Settings, client: Any = None) -> BedrockEmbedder:
        return cls(
            client or bedrock_runtime_client(settings),
            model=settings.embedding_model or DEFAULT_EMBEDDING_MODEL,
            dimensions=settings.embedding_dimensions,
            batch_size=settings.embedding_batch_size,
            retry=RetryPolicy.from_settings(settings),
        )

    def _embed_one(self, text: str, deadline: float) -> tuple[npt.NDArray[np.float32], int]:
        """The text's vector and the input tokens Titan counted (0 if it did not say)."""
        body = json.dumps({"inputText": text, "dimensions": self.dimension, "normalize": True})

        def request() -> bytes:
            response = self._client.invoke_model(
                modelId=self.model, body=body, contentType="application/json", accept="application/json"
            )
            return bytes(response["body"].read())  # inside the retries: the stream can break too

        raw = call_bedrock(self._retry, PROVIDER, self.model, request, deadline=deadline)
        try:
            payload = json.loads(raw)
            vector = np.asarray(payload["embedding"], dtype=np.float32)
        except (ValueError, TypeError, KeyError) as exc:
            raise ProviderError(PROVIDER, f"{self.model} returned no numeric 'embedding'") from exc
        if vector.shape != (self.dimension,):
            raise ProviderError(
                PROVIDER, f"{self.model} returned a vector of shape {vector.shape}, not ({self.dimension},)"
            )
        tokens = payload.get("inputTextTokenCount")
        return vector, tokens if isinstance(tokens, int) and tokens > 0 else 0

    def _embed_batch(self, texts: list[str]) -> npt.ArrayLike:
        deadline = self._retry.deadline()
        if len(texts) == 1:
            results = [self._embed_one(texts[0], deadline)]
        else:
            pool = ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_CALLS, len(texts)))
            try:
                futures = [pool.submit(self._embed_one, text, deadline) for text in texts]
                results = [future.result() for future in futures]
            finally:
                pool.shutdown(wait=True, cancel_futures=True)  # after a failure, the texts not yet sent never are
        # Counted here, on the caller's thread: the meter is a context variable the pool's threads lack.
        record_usage("embedding", self.fingerprint, input_tokens=sum(tokens for _, tokens in results))
        return np.vstack([vector for vector, _ in results])
