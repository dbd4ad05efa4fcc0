"""The remote embedders as deployed: Titan Text Embeddings V2 through botocore's Stubber (and
over real HTTP on 127.0.0.1 where concurrency or botocore's own behaviour matters), and an
OpenAI-compatible /embeddings endpoint served on 127.0.0.1."""

from __future__ import annotations

import email.utils
import hashlib
import io
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from rushmem.config import Settings
from rushmem.embeddings import create_embedder
from rushmem.embeddings.bedrock import BedrockEmbedder
from rushmem.embeddings.openai import OpenAIEmbedder
from rushmem.providers.lifecycle import DEFAULT_EMBEDDING_MODEL as TITAN
from rushmem_contract.errors import ProviderError
from tests.support.ingest import ChatServer, Reply

LIKES = ["tea", "jazz", "rust", "sql", "hiking", "chess"]
TEXTS = [f"memory number {i}: the user likes {word}" for i, word in enumerate(LIKES)]


def vector_for(text: str, dimension: int) -> list[float]:
    """A deterministic, text-specific, deliberately not unit-length vector."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
    return [float(x) for x in np.random.default_rng(seed).uniform(-3, 3, dimension)]


def unit(vector: list[float]) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    return v / np.linalg.norm(v)


def fast(**overrides: Any) -> Settings:
    """Settings with quick retries, so the tests spend milliseconds backing off."""
    values: dict[str, Any] = {"retry_base_delay_s": 0.01, "max_retries": 3, "http_timeout_s": 2.0}
    return Settings(**(values | overrides))


# ---- Bedrock: Titan Text Embeddings V2 (InvokeModel) ------------------------------------------


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture
def titan(aws_credentials: None) -> Iterator[tuple[Any, Stubber, list[str]]]:
    """A bedrock-runtime client under a Stubber, and the model ids of the calls it received."""
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    calls: list[str] = []
    client.meta.events.register(
        "before-parameter-build.bedrock-runtime.InvokeModel", lambda params, **_: calls.append(params["modelId"])
    )
    with Stubber(client) as stubber:
        yield client, stubber, calls


def titan_response(vector: list[float] | None = None, *, raw: bytes | None = None) -> dict[str, Any]:
    """The documented InvokeModel response of Titan Text Embeddings V2."""
    if raw is None:
        raw = json.dumps(
            {"embedding": vector, "inputTextTokenCount": 7, "embeddingsByType": {"float": vector}}
        ).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


def throttled(stubber: Stubber, times: int = 1) -> None:
    for _ in range(times):
        stubber.add_client_error(
            "invoke_model", service_error_code="ThrottlingException", service_message="Too many requests",
            http_status_code=429,
        )  # fmt: skip


def test_titan_is_asked_for_the_configured_dimensions_and_returns_unit_vectors(titan: Any) -> None:
    client, stubber, _ = titan
    raw = [3.0, 4.0] + [0.0] * 254
    stubber.add_response(
        "invoke_model",
        titan_response(raw),
        expected_params={
            "modelId": TITAN,
            "body": json.dumps({"inputText": "I drink tea.", "dimensions": 256, "normalize": True}),
            "contentType": "application/json",
            "accept": "application/json",
        },
    )
    embedder = BedrockEmbedder.from_settings(fast(embedding_provider="bedrock", embedding_dimensions=256), client)
    vector = embedder.embed_query("I drink tea.")
    stubber.assert_no_pending_responses()
    assert vector.shape == (256,) and vector.dtype == np.float32
    assert vector[:2].tolist() == pytest.approx([0.6, 0.8])  # normalised on our side too
    assert embedder.fingerprint == f"bedrock:{TITAN}:256"


def test_titan_throttling_is_retried_then_succeeds(titan: Any) -> None:
    client, stubber, calls = titan
    throttled(stubber, 2)
    stubber.add_response("invoke_model", titan_response(vector_for("tea", 1024)))
    vector = BedrockEmbedder.from_settings(fast(embedding_provider="bedrock"), client).embed_query("tea")
    assert len(calls) == 3
    assert vector == pytest.approx(unit(vector_for("tea", 1024)), abs=1e-6)


@pytest.mark.parametrize(
    ("code", "status"),
    [("AccessDeniedException", 403), ("ValidationException", 400), ("ResourceNotFoundException", 404)],
)
def test_a_permanent_titan_error_is_not_retried_and_names_the_provider_and_model(
    titan: Any, code: str, status: int
) -> None:
    client, stubber, calls = titan
    stubber.add_client_error("invoke_model", service_error_code=code, service_message="no", http_status_code=status)
    embedder = BedrockEmbedder.from_settings(fast(embedding_provider="bedrock"), client)
    with pytest.raises(ProviderError) as err:
        embedder.embed(["tea"])
    assert len(calls) == 1
    assert err.value.provider.startswith("bedrock") and TITAN in str(err.value) and code in str(err.value)


def test_titan_retries_stop_after_max_retries(titan: Any) -> None:
    client, stubber, calls = titan
    throttled(stubber, 6)
    embedder = BedrockEmbedder.from_settings(fast(embedding_provider="bedrock", max_retries=2), client)
    with pytest.raises(ProviderError) as err:
        embedder.embed(["tea"])
    assert len(calls) == 3  # the first try and two retries
    assert "ThrottlingException" in str(err.value) and TITAN in str(err.value)


def test_the_retry_budget_stops_titan_retries(titan: Any) -> None:
    # Backoff 0.1-0.2 s, then 0.2-0.4 s: the second wait would end past the 0.25 s budget.
    client, stubber, calls = titan
    throttled(stubber, 10)
    settings = fast(embedding_provider="bedrock", max_retries=10, retry_base_delay_s=0.2, retry_budget_s=0.25)
    embedder = BedrockEmbedder.from_settings(settings, client)
    started = time.monotonic()
    with pytest.raises(ProviderError):
        embedder.embed(["tea"])
    assert len(calls) == 2 and time.monotonic() - started < 0.4


@pytest.mark.parametrize(
    "raw",
    [
        b"<html>gateway error</html>",
        json.dumps({"embedding": "not a list"}).encode(),
        json.dumps({"embedding": [0.1, 0.2]}).encode(),  # 2 numbers, 1024 asked for
        json.dumps({"embedding": ["a"] * 1024}).encode(),
        json.dumps(["no", "object"]).encode(),
        json.dumps({"embedding": [float("inf")] * 1024}).encode(),  # would be stored as a zero vector
    ],
)
def test_a_malformed_titan_answer_is_a_provider_error(titan: Any, raw: bytes) -> None:
    client, stubber, _ = titan
    stubber.add_response("invoke_model", titan_response(raw=raw))
    with pytest.raises(ProviderError) as err:
        BedrockEmbedder.from_settings(fast(embedding_provider="bedrock"), client).embed(["tea"])
    assert "bedrock" in str(err.value) and TITAN in str(err.value)


@pytest.fixture
def titan_server(monkeypatch: pytest.MonkeyPatch, aws_credentials: None) -> Iterator[ChatServer]:
    """bedrock-runtime pointed at a local server that answers InvokeModel like Titan V2 (real
    HTTP, so botocore's own retry handling and connection pool are in play)."""
    with ChatServer() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.base_url.removesuffix("/v1"))
        server.default = Reply(
            body=lambda req: {"embedding": vector_for(req["inputText"], req["dimensions"]), "inputTextTokenCount": 7},
            delay_s=0.1,
        )
        yield server


def test_titan_batches_are_concurrent_calls_bounded_by_the_batch_size(titan_server: ChatServer) -> None:
    texts = TEXTS * 3
    settings = fast(embedding_provider="bedrock", bedrock_region="us-east-1", embedding_dimensions=512)
    vectors = create_embedder(settings).embed(texts)
    assert sorted(r.json["inputText"] for r in titan_server.requests) == sorted(texts)
    assert titan_server.max_in_flight > 3  # one text per call, several calls at once
    for text, row in zip(texts, vectors, strict=True):  # in input order
        assert row == pytest.approx(unit(vector_for(text, 512)), abs=1e-6)

    titan_server.max_in_flight = 0
    narrow = create_embedder(settings.model_copy(update={"embedding_batch_size": 2}))
    assert narrow.embed(texts).shape == (len(texts), 512)
    assert titan_server.max_in_flight <= 2


def test_botocore_does_not_retry_behind_the_budget(titan_server: ChatServer) -> None:
    titan_server.default = Reply(
        503, {"message": "Bedrock is unavailable"}, headers={"x-amzn-ErrorType": "ServiceUnavailableException"}
    )
    settings = fast(
        embedding_provider="bedrock", bedrock_region="us-east-1", max_retries=5,
        retry_base_delay_s=0.2, retry_budget_s=0.25,
    )  # fmt: skip
    started = time.monotonic()
    with pytest.raises(ProviderError) as err:
        create_embedder(settings).embed(["tea"])
    # Two requests, not botocore's own retries on top of ours (5 x its backoff would take seconds);
    # the time bound is loose so that a loaded machine cannot fail it.
    assert len(titan_server.requests) == 2 and time.monotonic() - started < 2.0
    assert "ServiceUnavailableException" in str(err.value)


def test_the_bedrock_client_leaves_retries_to_the_shared_policy() -> None:
    embedder = create_embedder(
        Settings(embedding_provider="bedrock", bedrock_region="eu-west-1", http_timeout_s=7, max_retries=2)
    )
    assert isinstance(embedder, BedrockEmbedder)
    config = embedder._client.meta.config
    assert (config.read_timeout, config.connect_timeout) == (7, 7)
    assert config.retries["total_max_attempts"] == 1


# ---- OpenAI-compatible /embeddings over real HTTP ---------------------------------------------


def embeddings_answer(request: Any, *, order: slice = slice(None)) -> dict[str, Any]:
    """The documented /embeddings response for a request (items in ``order``)."""
    dimension = request.get("dimensions", 1536)
    items = [
        {"object": "embedding", "index": i, "embedding": vector_for(text, dimension)}
        for i, text in enumerate(request["input"])
    ]
    return {"object": "list", "data": items[order], "model": request["model"], "usage": {"prompt_tokens": 9}}


@pytest.fixture
def openai_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        server.default = Reply(body=embeddings_answer)
        yield server


def openai_embedder(server: ChatServer, **overrides: Any) -> OpenAIEmbedder:
    settings = fast(embedding_provider="openai", openai_base_url=server.base_url, openai_api_key="sk-test", **overrides)
    embedder = create_embedder(settings)
    assert isinstance(embedder, OpenAIEmbedder)
    return embedder


def test_texts_are_sent_in_batches_of_the_batch_size_and_come_back_in_order(openai_server: ChatServer) -> None:
    vectors = openai_embedder(openai_server, embedding_batch_size=4).embed(TEXTS)
    assert [r.path for r in openai_server.requests] == ["/v1/embeddings"] * 2
    assert [r.json["input"] for r in openai_server.requests] == [TEXTS[:4], TEXTS[4:]]
    assert {r.json["model"] for r in openai_server.requests} == {"text-embedding-3-small"}
    assert openai_server.requests[0].headers["Authorization"] == "Bearer sk-test"
    assert vectors.shape == (len(TEXTS), 1536)
    for text, row in zip(TEXTS, vectors, strict=True):
        assert row == pytest.approx(unit(vector_for(text, 1536)), abs=1e-6)


def test_dimensions_are_sent_only_when_configured(openai_server: ChatServer) -> None:
    assert openai_embedder(openai_server).embed(["tea"]).shape == (1, 1536)
    assert "dimensions" not in openai_server.requests[-1].json
    embedder = openai_embedder(openai_server, embedding_model="embedding-3", embedding_dimensions=1024)
    assert embedder.embed(["tea"]).shape == (1, 1024)
    assert openai_server.requests[-1].json["dimensions"] == 1024
    assert openai_server.requests[-1].json["model"] == "embedding-3"


def test_items_answered_out_of_order_are_put_back_by_index(openai_server: ChatServer) -> None:
    openai_server.default = Reply(body=lambda req: embeddings_answer(req, order=slice(None, None, -1)))
    vectors = openai_embedder(openai_server).embed(TEXTS)
    for text, row in zip(TEXTS, vectors, strict=True):
        assert row == pytest.approx(unit(vector_for(text, 1536)), abs=1e-6)


def rate_limited(retry_after: str) -> Reply:
    return Reply(
        429, {"error": {"message": "Rate limit reached", "type": "requests"}}, headers={"Retry-After": retry_after}
    )


def http_date(offset_s: float) -> str:
    return email.utils.formatdate(time.time() + offset_s, usegmt=True)


@pytest.mark.parametrize(
    "retry_after",
    ["0", "0.2", "soon", "-3", "nan", "inf", http_date(-3600), "Sun, 32 Foo 2026 99:00:00 GMT"],
)
def test_a_429_is_retried_after_its_retry_after_whatever_its_form(openai_server: ChatServer, retry_after: str) -> None:
    # A value that is not a delay or a date falls back to the backoff; one in the past is 0.
    openai_server.script(rate_limited(retry_after))
    started = time.monotonic()
    vectors = openai_embedder(openai_server).embed(["tea"])
    assert len(openai_server.requests) == 2 and vectors.shape == (1, 1536)
    elapsed = time.monotonic() - started
    assert elapsed >= (0.2 if retry_after == "0.2" else 0) and elapsed < 1.5


def test_a_retry_after_past_the_budget_gives_up_at_once(openai_server: ChatServer) -> None:
    openai_server.script(rate_limited("20"))
    started = time.monotonic()
    with pytest.raises(ProviderError) as err:
        openai_embedder(openai_server, retry_budget_s=5).embed(["tea"])
    assert len(openai_server.requests) == 1 and time.monotonic() - started < 1
    assert "429" in str(err.value) and "Rate limit reached" in str(err.value)


def test_5xx_are_retried_until_the_budget_runs_out(openai_server: ChatServer) -> None:
    openai_server.default = Reply(500, {"error": {"message": "internal error", "type": "server_error"}})
    started = time.monotonic()
    with pytest.raises(ProviderError) as err:
        openai_embedder(openai_server, max_retries=10, retry_base_delay_s=0.2, retry_budget_s=0.25).embed(["tea"])
    # Ten retries would wait seconds (0.2 s doubling); the budget stops after the first. The bound is
    # loose so that a loaded machine's scheduling cannot fail it.
    assert len(openai_server.requests) == 2 and time.monotonic() - started < 2.0
    assert err.value.provider == "openai embeddings"
    assert "HTTP 500" in str(err.value) and "text-embedding-3-small" in str(err.value)


def test_a_rejected_key_is_not_retried_and_names_the_provider_and_model(openai_server: ChatServer) -> None:
    openai_server.default = Reply(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
    with pytest.raises(ProviderError) as err:
        openai_embedder(openai_server).embed(["tea"])
    assert len(openai_server.requests) == 1
    assert err.value.provider == "openai embeddings"
    assert "invalid api key" in str(err.value) and "text-embedding-3-small" in str(err.value)


def _drop_last(req: Any) -> dict[str, Any]:
    return embeddings_answer(req, order=slice(None, -1))


def _short_vectors(req: Any) -> dict[str, Any]:
    return embeddings_answer(req | {"dimensions": 8})


def _ragged(req: Any) -> dict[str, Any]:
    answer = embeddings_answer(req)
    answer["data"][0]["embedding"] = answer["data"][0]["embedding"][:10]
    return answer


def _not_objects(req: Any) -> dict[str, Any]:
    return {"data": [[0.1] * 1536 for _ in req["input"]]}


def _same_index(req: Any) -> dict[str, Any]:
    answer = embeddings_answer(req)
    for item in answer["data"]:
        item["index"] = 0
    return answer


def _not_finite(req: Any) -> dict[str, Any]:
    answer = embeddings_answer(req)
    answer["data"][1]["embedding"][5] = float("nan")
    return answer


@pytest.mark.parametrize("answer", [_drop_last, _short_vectors, _ragged, _not_objects, _same_index, _not_finite])
def test_a_wrong_number_or_shape_of_vectors_is_a_provider_error(openai_server: ChatServer, answer: Any) -> None:
    openai_server.default = Reply(body=answer)
    with pytest.raises(ProviderError) as err:
        openai_embedder(openai_server).embed(TEXTS[:3])
    assert "openai" in str(err.value) and "text-embedding-3-small" in str(err.value)
    assert len(openai_server.requests) == 1  # a malformed answer is not retried


@pytest.mark.parametrize(("status", "tries"), [(500, 2), (503, 2), (520, 2), (529, 2), (501, 1), (400, 1)])
def test_any_5xx_but_501_is_retried(openai_server: ChatServer, status: int, tries: int) -> None:
    # 520-529: what a CDN such as Cloudflare answers when the provider behind it fails for a moment.
    openai_server.script(Reply(status, {"error": {"message": "upstream trouble"}}))
    embedder = openai_embedder(openai_server)
    if tries == 1:
        with pytest.raises(ProviderError, match=f"HTTP {status}"):
            embedder.embed(["tea"])
    else:
        assert embedder.embed(["tea"]).shape == (1, 1536)
    assert len(openai_server.requests) == tries


def test_a_base_url_httpx_cannot_call_fails_at_once() -> None:
    settings = fast(embedding_provider="openai", openai_base_url="ftp://127.0.0.1/v1", retry_base_delay_s=5)
    started = time.monotonic()
    with pytest.raises(ProviderError, match=re.escape("cannot call ftp://127.0.0.1/v1/embeddings")):
        create_embedder(settings).embed(["tea"])
    assert time.monotonic() - started < 1  # not retried: a wrong URL stays wrong
