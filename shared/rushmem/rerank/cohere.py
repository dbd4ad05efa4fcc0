"""Any Cohere-compatible ``POST {base}/rerank``: Cohere (``https://api.cohere.com/v2``), Jina
(``https://api.jina.ai/v1``), Voyage (``https://api.voyageai.com/v1``), vLLM (``http://host:8000/v1``),
LiteLLM and Infinity.

The request is the shape they share, ``{model, query, documents}`` (no ``top_n``: every document
is scored, and Voyage calls it ``top_k``); the answer ``{results: [{index, relevance_score}]}``
(Voyage: ``data``; ``score`` is read too). Text Embeddings Inference's own ``/rerank`` takes
``texts`` and answers a bare list: put a Cohere-compatible proxy in front of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rushmem.config import Settings
from rushmem.providers.aws import rerank_api_key
from rushmem.providers.http import EndpointSettings, OpenAICompatClient
from rushmem.rerank.base import Reranker, scores_by_index, short_retry
from rushmem_contract.errors import ProviderError

if TYPE_CHECKING:
    import httpx

DEFAULT_MODEL = "rerank-v3.5"
PROVIDER = "cohere rerank"


class CohereReranker(Reranker):
    provider = "cohere"
    api_key_setting = "rerank_api_key"

    def __init__(self, client: OpenAICompatClient, model: str = DEFAULT_MODEL) -> None:
        super().__init__()
        self._client = client
        self.model = model

    @classmethod
    def from_settings(cls, settings: Settings, transport: httpx.BaseTransport | None = None) -> CohereReranker:
        client = OpenAICompatClient(
            PROVIDER,
            settings.rerank_base_url,
            rerank_api_key(settings),
            timeout_s=settings.rerank_timeout_s,
            retry=short_retry(settings),
            transport=transport,
            names=EndpointSettings("RUSHMEM_RERANK_BASE_URL", "RUSHMEM_RERANK_API_KEY", "RUSHMEM_RERANK_MODEL"),
        )
        return cls(client, model=settings.rerank_model or DEFAULT_MODEL)

    def _scores(self, query: str, documents: list[str]) -> list[float]:
        body = self._client.post_json("rerank", {"model": self.model, "query": query, "documents": documents})
        results = body.get("results", body.get("data"))
        try:
            return scores_by_index(results, len(documents), index_key="index", score_keys=("relevance_score", "score"))
        except ValueError as exc:
            raise ProviderError(PROVIDER, f"{self.model}: /rerank {exc}") from exc
