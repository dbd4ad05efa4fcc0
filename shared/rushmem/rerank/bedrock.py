"""The Bedrock Rerank API (bedrock-agent-runtime ``rerank``): ``amazon.rerank-v1:0`` (default) or
``cohere.rerank-v3-5:0``, in the regions that offer them (not every region does; set
``AGENT_MEMORY_BEDROCK_REGION``). The function's role needs ``bedrock:Rerank`` and
``bedrock:InvokeModel`` on the model (the template grants both when RerankProvider=bedrock).
"""

from __future__ import annotations

from typing import Any

from rushmem.config import Settings
from rushmem.providers.bedrock import bedrock_agent_runtime_client, call_bedrock
from rushmem.providers.lifecycle import DEFAULT_RERANK_MODEL
from rushmem.providers.retry import RetryPolicy
from rushmem.rerank.base import Reranker, scores_by_index, short_retry
from rushmem_contract.errors import ProviderError

PROVIDER = "bedrock rerank"


class BedrockReranker(Reranker):
    provider = "bedrock"

    def __init__(self, client: Any, model: str = DEFAULT_RERANK_MODEL, *, retry: RetryPolicy | None = None) -> None:
        super().__init__()
        self._client = client
        self.model = model
        self._retry = retry or RetryPolicy()

    @classmethod
    def from_settings(cls, settings: Settings, client: Any = None) -> BedrockReranker:
        return cls(
            client or bedrock_agent_runtime_client(settings, timeout_s=settings.rerank_timeout_s),
            model=settings.rerank_model or DEFAULT_RERANK_MODEL,
            retry=short_retry(settings),
        )

    @property
    def model_arn(self) -> str:
        """The Rerank API takes the foundation model's ARN, in the client's region and partition."""
        if self.model.startswith("arn:"):
            return self.model
        meta = self._client.meta
        return f"arn:{meta.partition}:bedrock:{meta.region_name}::foundation-model/{self.model}"

    def _scores(self, query: str, documents: list[str]) -> list[float]:
        request = {
            "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
            "sources": [
                {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": d}}}
                for d in documents
            ],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "numberOfResults": len(documents),
                    "modelConfiguration": {"modelArn": self.model_arn},
                },
            },
        }
        answer = call_bedrock(self._retry, PROVIDER, self.model, lambda: self._client.rerank(**request))
        try:
            return scores_by_index(
                answer.get("results"), len(documents), index_key="index", score_keys=("relevanceScore",)
            )
        except ValueError as exc:
            raise ProviderError(PROVIDER, f"{self.model}: {exc}") from exc
