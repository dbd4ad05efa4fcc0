"""Rerank providers as deployed: the Bedrock Rerank API through botocore's Stubber, a
Cohere-compatible /rerank on a loopback HTTP server (real HTTP on 127.0.0.1), and a recall on the
embedded database that a reranker reorders, or, when it fails or is too slow, leaves in the fused
order without failing."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from rushmem.config import Settings
from rushmem.providers.retry import RetryPolicy
from rushmem.rerank import create_reranker
from rushmem.rerank.bedrock import BedrockReranker
from rushmem.rerank.cohere import CohereReranker
from rushmem.service import Memory
from rushmem_contract.models import NewMemory
from tests.support.ingest import ChatServer, Reply

DOCS = ["The user lives in Lisbon.", "The user has a dog named Rex.", "The user prefers tea."]
NO_WAIT = RetryPolicy(max_retries=1, base_delay_s=0.0, budget_s=5.0, sleep=lambda _s: None)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def cohere_settings(server: ChatServer, **overrides: Any) -> dict[str, Any]:
    return {
        "rerank_provider": "cohere",
        "rerank_base_url": server.base_url,
        "rerank_api_key": "rk-test",
        "rerank_timeout_s": 0.5,
        "max_retries": 1,
        "retry_base_delay_s": 0.01,
        **overrides,
    }


def with_reranker(settings: Settings, server: ChatServer, **overrides: Any) -> Settings:
    return Settings.model_validate({**settings.model_dump(), **cohere_settings(server, **overrides)})


def cohere_answer(*scores: float, key: str = "results", score: str = "relevance_score") -> dict[str, Any]:
    """Results best first, as providers send them (not in document order)."""
    ranked = sorted(enumerate(scores), key=lambda item: -item[1])
    return {key: [{"index": i, score: s} for i, s in ranked]}


# ---- Cohere-compatible HTTP ----------------------------------------------------------------------


def test_a_cohere_compatible_endpoint_scores_every_document_in_their_order(server: ChatServer) -> None:
    server.script(Reply(body=cohere_answer(0.1, 0.9, 0.3)))
    reranker = create_reranker(Settings(**cohere_settings(server, rerank_model="jina-reranker-v2")))
    assert isinstance(reranker, CohereReranker)
    assert reranker.scores("Where does the user live?", DOCS) == [0.1, 0.9, 0.3]
    (request,) = server.requests
    assert request.path == "/v1/rerank"
    assert request.json == {"model": "jina-reranker-v2", "query": "Where does the user live?", "documents": DOCS}
    assert request.headers["Authorization"] == "Bearer rk-test"
    assert (reranker.calls, reranker.fallbacks) == (1, 0)


def test_voyage_style_answers_and_left_out_documents_are_read(server: ChatServer) -> None:
    server.script(Reply(body=cohere_answer(0.2, 0.7, 0.4, key="data", score="score")))
    server.script(Reply(body={"results": [{"index": 2, "relevance_score": 0.8}, {"index": 0, "relevance_score": 0.5}]}))
    reranker = CohereReranker.from_settings(Settings(**cohere_settings(server)))
    assert reranker.scores("q", DOCS) == [0.2, 0.7, 0.4]
    assert reranker.scores("q", DOCS) == [0.5, 0.5, 0.8]  # not ranked: as low as the lowest given


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=401, body={"message": "invalid api token"}),
        Reply(body={"results": [{"index": 7, "relevance_score": 0.5}]}),  # not a document index
        Reply(body={"results": [{"index": 0}]}),  # no score
        Reply(body={"id": "x"}),  # no results at all
        Reply(body="not json"),
    ],
)
def test_a_refusal_or_an_answer_that_does_not_fit_falls_back(
    server: ChatServer, reply: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(reply)
    reranker = CohereReranker.from_settings(Settings(**cohere_settings(server)))
    with caplog.at_level(logging.WARNING, logger="rushmem.rerank.base"):
        assert reranker.scores("q", DOCS) is None
    assert (reranker.calls, reranker.fallbacks) == (1, 1)
    assert "rerank failed; the fused order stands" in caplog.text
    assert len(server.requests) == 1  # a 4xx or a bad answer is not retried


def test_a_5xx_is_retried_within_the_budget(server: ChatServer) -> None:
    server.script(Reply(status=503, body={"message": "overloaded"}), Reply(body=cohere_answer(0.3, 0.2, 0.1)))
    reranker = CohereReranker.from_settings(Settings(**cohere_settings(server)))
    assert reranker.scores("q", DOCS) == [0.3, 0.2, 0.1]
    assert len(server.requests) == 2 and reranker.fallbacks == 0


def test_a_reranker_slower_than_its_timeout_falls_back_in_time(server: ChatServer) -> None:
    server.default = Reply(body=cohere_answer(0.3, 0.2, 0.1), delay_s=2.0)
    reranker = CohereReranker.from_settings(Settings(**cohere_settings(server, rerank_timeout_s=0.3)))
    started = time.monotonic()
    assert reranker.scores("q", DOCS) is None
    # One attempt of 0.3 s; a retry would end past the 0.3 s budget, so none starts.
    assert time.monotonic() - started < 1.5
    assert reranker.fallbacks == 1


# ---- Bedrock Rerank API --------------------------------------------------------------------------


@pytest.fixture
def agent_runtime(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return boto3.client("bedrock-agent-runtime", region_name="us-west-2")


def bedrock_request(model_arn: str, query: str, documents: list[str]) -> dict[str, Any]:
    return {
        "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
        "sources": [
            {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": d}}} for d in documents
        ],
        "rerankingConfiguration": {
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {
                "numberOfResults": len(documents),
                "modelConfiguration": {"modelArn": model_arn},
            },
        },
    }


def test_bedrock_rerank_sends_the_models_arn_and_reads_the_scores(agent_runtime: Any) -> None:
    arn = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"
    reranker = BedrockReranker(agent_runtime, retry=NO_WAIT)
    with Stubber(agent_runtime) as stubber:
        stubber.add_response(
            "rerank",
            {"results": [{"index": 1, "relevanceScore": 0.92}, {"index": 0, "relevanceScore": 0.4}]},
            expected_params=bedrock_request(arn, "Where does the user live?", DOCS[:2]),
        )
        assert reranker.scores("Where does the user live?", DOCS[:2]) == [0.4, 0.92]
        stubber.assert_no_pending_responses()


def test_bedrock_throttling_is_retried_and_a_refusal_falls_back(agent_runtime: Any) -> None:
    reranker = BedrockReranker(agent_runtime, model="cohere.rerank-v3-5:0", retry=NO_WAIT)
    arn = "arn:aws:bedrock:us-west-2::foundation-model/cohere.rerank-v3-5:0"
    with Stubber(agent_runtime) as stubber:
        stubber.add_client_error("rerank", "ThrottlingException", "slow down", 429)
        answer = {"results": [{"index": 0, "relevanceScore": 0.5}]}
        stubber.add_response("rerank", answer, expected_params=bedrock_request(arn, "q", ["a"]))
        stubber.add_client_error("rerank", "AccessDeniedException", "no bedrock:Rerank", 403)
        assert reranker.scores("q", ["a"]) == [0.5]
        assert reranker.scores("q", ["a"]) is None
        stubber.assert_no_pending_responses()
    assert (reranker.calls, reranker.fallbacks) == (2, 1)


def test_the_bedrock_provider_is_built_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    reranker = create_reranker(Settings(rerank_provider="bedrock", bedrock_region="eu-central-1"))
    assert isinstance(reranker, BedrockReranker)
    assert reranker.model_arn == "arn:aws:bedrock:eu-central-1::foundation-model/amazon.rerank-v1:0"
    assert create_reranker(Settings()) is None


# ---- in a recall ---------------------------------------------------------------------------------


def _reverse_alphabetical(request: Any) -> dict[str, Any]:
    """A stand-in reranker that prefers documents later in the alphabet."""
    docs = request["documents"]
    order = sorted(range(len(docs)), key=lambda i: docs[i], reverse=True)
    return {"results": [{"index": i, "relevance_score": 1.0 - rank / len(docs)} for rank, i in enumerate(order)]}


FACTS = [f"{letter} fact about the garden roses" for letter in "ABCDEFGH"]


def test_a_reranker_reorders_the_best_candidates_of_a_recall(settings: Settings, server: ChatServer) -> None:
    server.default = Reply(body=_reverse_alphabetical)
    service = Memory(with_reranker(settings, server))
    try:
        service.add([NewMemory(content=f) for f in FACTS], user_id="u1")
        plain = service.recall("garden roses", user_id="u1", limit=3, plan=service.admin.recall_plan.but(rerank=False))
        reranked = service.recall(
            "garden roses", user_id="u1", limit=3, plan=service.admin.recall_plan.but(rerank_weight=1.0, mmr=False)
        )
        assert [m.content for m in reranked.memories] == ["H fact about the garden roses", *FACTS[6:4:-1]]
        assert [m.content for m in plain.memories] != [m.content for m in reranked.memories]
        (request,) = server.requests  # rerank=False sent nothing
        assert sorted(request.json["documents"]) == FACTS  # every candidate, up to rerank_top_n
        assert request.json["query"] == "garden roses"
        assert service.admin.rerank_fallbacks == 0
    finally:
        service.close()


def test_a_failing_or_slow_reranker_never_fails_a_recall(settings: Settings, server: ChatServer) -> None:
    server.script(Reply(status=500, body={"message": "boom"}), Reply(status=500, body={"message": "boom"}))
    server.default = Reply(body=_reverse_alphabetical, delay_s=2.0)
    service = Memory(with_reranker(settings, server, rerank_timeout_s=0.3))
    try:
        service.add([NewMemory(content=f) for f in FACTS], user_id="u1")
        fused = service.recall("garden roses", user_id="u1", limit=3, plan=service.admin.recall_plan.but(rerank=False))
        failed = service.recall("garden roses", user_id="u1", limit=3)  # 500, retried once, 500 again
        started = time.monotonic()
        slow = service.recall("garden roses", user_id="u1", limit=3)
        assert time.monotonic() - started < 1.5
        assert failed.memories == fused.memories == slow.memories  # the fused order stands
        assert service.admin.rerank_fallbacks == 2
    finally:
        service.close()
