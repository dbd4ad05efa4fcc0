"""A remote provider without its key says so when it is built, before any request: not a 401 (or an
unreachable host) after the retries."""

from __future__ import annotations

import httpx
import pytest

from rushmem.config import Settings
from rushmem.embeddings import create_embedder
from rushmem.embeddings.openai import OpenAIEmbedder
from rushmem.extraction.openai import OpenAIChatExtractor
from rushmem_contract.errors import ConfigurationError


class CountingTransport(httpx.MockTransport):
    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        super().__init__(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path.endswith("/embeddings"):
            return httpx.Response(200, json={"data": [{"index": 0, "embedding": [0.6, 0.8]}]})
        return httpx.Response(401, json={"error": {"message": "Incorrect API key provided"}})


def test_the_openai_embedder_without_a_key_names_the_setting_before_any_request() -> None:
    transport = CountingTransport()
    with pytest.raises(ConfigurationError) as err:
        OpenAIEmbedder.from_settings(Settings(embedding_provider="openai"), transport)
    message = str(err.value)
    assert "no API key for https://api.openai.com/v1" in message
    assert "RUSHMEM_OPENAI_API_KEY" in message and "OPENAI_API_KEY" in message
    assert transport.requests == []
    # The factory every door uses says the same.
    with pytest.raises(ConfigurationError, match="no API key"):
        create_embedder(Settings(embedding_provider="openai", openai_base_url="https://open.bigmodel.cn/api/paas/v4"))


def test_the_openai_extractor_without_a_key_names_its_own_setting_before_any_request() -> None:
    transport = CountingTransport()
    with pytest.raises(ConfigurationError) as err:
        OpenAIChatExtractor.from_settings(Settings(llm_provider="openai"), transport)
    assert "RUSHMEM_LLM_API_KEY" in str(err.value)
    assert transport.requests == []


def test_a_key_or_a_server_on_this_machine_builds_the_provider() -> None:
    transport = CountingTransport()
    with_key = OpenAIEmbedder.from_settings(
        Settings(embedding_provider="openai", openai_api_key="sk-x", embedding_dimensions=2), transport
    )
    assert with_key.embed_query("tea").shape == (2,)
    assert transport.requests[0].headers["Authorization"] == "Bearer sk-x"
    # Ollama, vLLM or llama.cpp on this machine often take no key.
    for url in ("http://127.0.0.1:11434/v1", "http://localhost:8000/v1", "http://[::1]:8000/v1"):
        local = OpenAIEmbedder.from_settings(
            Settings(embedding_provider="openai", openai_base_url=url, embedding_dimensions=2), transport
        )
        assert local.embed_query("tea").shape == (2,)
    assert all("Authorization" not in request.headers for request in transport.requests[1:])
