"""Extraction with any OpenAI-compatible chat completions endpoint: Zhipu GLM (as in the article),
OpenAI, ... (Zhipu's settings: docs/how-it-works.md, "The write path").
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Unpack

from rushmem.config import Settings
from rushmem.extraction.llm import LLMExtractor, LLMOptions, llm_options
from rushmem.providers.aws import llm_api_key
from rushmem.providers.http import EndpointSettings, OpenAICompatClient
from rushmem_contract.errors import ProviderError

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)


class OpenAIChatExtractor(LLMExtractor):
    provider = "openai"
    api_key_setting = "llm_api_key"

    def __init__(
        self, client: OpenAICompatClient, model: str, *, json_mode: bool = True, **options: Unpack[LLMOptions]
    ) -> None:
        super().__init__(model, **options)
        self._client = client
        self.json_mode = json_mode

    @classmethod
    def from_settings(cls, settings: Settings, transport: httpx.BaseTransport | None = None) -> OpenAIChatExtractor:
        base_url = settings.llm_base_url or settings.openai_base_url
        client = OpenAICompatClient.for_settings(
            "openai chat",
            base_url,
            llm_api_key(settings),
            settings,
            transport,
            names=EndpointSettings(
                url="RUSHMEM_LLM_BASE_URL (or RUSHMEM_OPENAI_BASE_URL)"
                if settings.llm_base_url
                else EndpointSettings.url,
                key="RUSHMEM_LLM_API_KEY, or the embeddings' RUSHMEM_OPENAI_API_KEY (or OPENAI_API_KEY)",
                model="RUSHMEM_LLM_MODEL",
            ),
        )
        # Without a model named: Zhipu's or OpenAI's small one, by the endpoint.
        model = settings.llm_model or ("glm-4-flash" if "bigmodel.cn" in base_url else "gpt-4o-mini")
        return cls(client, model, json_mode=settings.llm_json_mode, **llm_options(settings))

    def _complete(self, system: str, user: str) -> str:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.json_mode:
            payload["response_format"] = {"type": "json_object"}
        body = self._client.post_json("chat/completions", payload)
        usage = body.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        self._record_call(
            system, user, input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens")
        )
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ProviderError("openai chat", f"{self.model}: the response has no choices")
        message = choices[0].get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise ProviderError("openai chat", f"{self.model}: the response has no message content")
        if choices[0].get("finish_reason") == "length":
            logger.warning("extraction answer cut at max_tokens=%d; keeping its complete items", self.max_tokens)
        return content
