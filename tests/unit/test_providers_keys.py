"""A remote provider without its key says so when it is built, before any request: not a 401 (or an
unreachable host) after the retries."""

from __future__ import annotations

import re

import boto3
import httpx
import pytest

from rushmem.config import Settings
from rushmem.embeddings import create_embedder
from rushmem.embeddings.openai import OpenAIEmbedder
from rushmem.extraction import create_extractor
from rushmem.extraction.openai import OpenAIChatExtractor
from rushmem.providers.comprehend import ComprehendPiiDetector
from rushmem.rerank import create_reranker
from rushmem_contract.errors import ConfigurationError
from rushmem_contract.models import ChatMessage


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


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No Region and no credentials from anywhere: environment, files or the instance metadata."""
    for name in (
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # boto3's default session keeps the credentials it found first (an earlier test's): a fresh one.
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    return monkeypatch


REGION_MESSAGE = "no AWS Region: set RUSHMEM_BEDROCK_REGION (or AWS_DEFAULT_REGION)"


def test_each_bedrock_provider_without_a_region_names_the_setting(no_aws: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(f"bedrock-runtime: {REGION_MESSAGE}")):
        create_embedder(Settings(embedding_provider="bedrock"))
    with pytest.raises(ConfigurationError, match=re.escape(f"bedrock-runtime: {REGION_MESSAGE}")):
        create_extractor(Settings(llm_provider="bedrock"))
    with pytest.raises(ConfigurationError, match=re.escape(f"bedrock-agent-runtime: {REGION_MESSAGE}")):
        create_reranker(Settings(rerank_provider="bedrock"))
    with pytest.raises(ConfigurationError, match=re.escape(f"comprehend: {REGION_MESSAGE}")):
        ComprehendPiiDetector.from_settings(Settings(pii="redact", pii_comprehend=True)).client  # noqa: B018


def test_a_bedrock_call_without_credentials_says_where_they_come_from(no_aws: pytest.MonkeyPatch) -> None:
    extractor = create_extractor(Settings(llm_provider="bedrock", bedrock_region="eu-west-1"))
    with pytest.raises(ConfigurationError) as err:  # raised while signing: no request leaves
        extractor.extract([ChatMessage(role="user", content="I prefer tea")])
    assert str(err.value).startswith("bedrock converse: no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID")


@pytest.mark.parametrize(
    ("settings", "setting"),
    [
        (Settings(llm_provider="openai", llm_api_key="k", llm_base_url="localhost:11434/v1"), "RUSHMEM_LLM_BASE_URL"),
        (Settings(llm_provider="openai", llm_api_key="k", openai_base_url=""), "RUSHMEM_OPENAI_BASE_URL"),
        (Settings(rerank_provider="cohere", rerank_api_key="k", rerank_base_url="ftp://x"), "RUSHMEM_RERANK_BASE_URL"),
    ],
)
def test_an_endpoint_that_is_no_http_url_names_its_setting(settings: Settings, setting: str) -> None:
    build = create_reranker if settings.rerank_provider == "cohere" else create_extractor
    with pytest.raises(ConfigurationError, match=f"is not an http\\(s\\) URL: set {setting}"):
        build(settings)


@pytest.mark.parametrize(("status", "setting"), [(401, "RUSHMEM_LLM_API_KEY"), (404, "RUSHMEM_LLM_MODEL")])
def test_a_refused_key_or_an_unknown_model_names_the_setting_to_fix(status: int, setting: str) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(status, json={"error": {"message": "no"}}))
    extractor = OpenAIChatExtractor.from_settings(Settings(llm_provider="openai", llm_api_key="k"), transport)
    with pytest.raises(ConfigurationError, match=f"HTTP {status} from chat/completions: no: check {setting}"):
        extractor.extract([ChatMessage(role="user", content="I prefer tea")])
