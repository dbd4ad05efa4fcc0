"""Extraction with the Bedrock Converse API (any Converse chat model; Amazon Nova 2 Lite through
the US cross-Region inference profile by default: which models it can call, docs/deployment.md).

Converse has no JSON output mode common to all models, so the answer is parsed tolerantly
(see parsing). Throttling, 5xx and timeouts are retried under the shared policy
(:mod:`rushmem.providers.retry`).
"""

from __future__ import annotations

import logging
from typing import Any, Unpack

from rushmem.config import Settings
from rushmem.extraction.llm import LLMExtractor, LLMOptions, llm_options
from rushmem.providers.bedrock import bedrock_runtime_client, call_bedrock
from rushmem.providers.lifecycle import DEFAULT_EXTRACTION_MODEL
from rushmem.providers.retry import RetryPolicy
from rushmem_contract.errors import ProviderError

logger = logging.getLogger(__name__)

PROVIDER = "bedrock converse"


class BedrockConverseExtractor(LLMExtractor):
    provider = "bedrock"

    def __init__(
        self,
        client: Any,
        model: str = DEFAULT_EXTRACTION_MODEL,
        *,
        retry: RetryPolicy | None = None,
        **options: Unpack[LLMOptions],
    ) -> None:
        super().__init__(model, **options)
        self._client = client
        self._retry = retry or RetryPolicy()

    @classmethod
    def from_settings(cls, settings: Settings, client: Any = None) -> BedrockConverseExtractor:
        options = llm_options(settings)
        options["temperature"] = min(settings.llm_temperature, 1.0)  # Converse models take 0..1
        return cls(
            client or bedrock_runtime_client(settings),
            settings.llm_model or DEFAULT_EXTRACTION_MODEL,
            retry=RetryPolicy.from_settings(settings),
            **options,
        )

    def _complete(self, system: str, user: str) -> str:
        def request() -> Any:
            return self._client.converse(
                modelId=self.model,
                system=[{"text": system}],
                messages=[{"role": "user", "content": [{"text": user}]}],
                inferenceConfig={"maxTokens": self.max_tokens, "temperature": self.temperature},
            )

        response = call_bedrock(self._retry, PROVIDER, self.model, request)
        usage = response.get("usage") or {}
        self._record_call(system, user, input_tokens=usage.get("inputTokens"), output_tokens=usage.get("outputTokens"))
        content = ((response.get("output") or {}).get("message") or {}).get("content") or []
        texts = [block["text"] for block in content if isinstance(block, dict) and isinstance(block.get("text"), str)]
        if not texts:
            raise ProviderError(PROVIDER, f"{self.model}: the response has no text")
        if response.get("stopReason") == "max_tokens":
            logger.warning("extraction answer cut at maxTokens=%d; keeping its complete items", self.max_tokens)
        return "".join(texts)
