"""LLM extraction providers on the write path: a real HTTP server on 127.0.0.1 speaking the
chat completions API (openai), and botocore's Stubber for the Bedrock Converse API."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from rushmem.config import Settings
from rushmem.extraction import create_extractor
from rushmem.extraction.bedrock import BedrockConverseExtractor
from rushmem.extraction.openai import OpenAIChatExtractor
from rushmem.extraction.prompt import build_prompt
from rushmem.providers.lifecycle import DEFAULT_EXTRACTION_MODEL as DEFAULT_MODEL
from rushmem.providers.retry import RetryPolicy
from rushmem.service import Memory
from rushmem_contract.errors import ProviderError
from rushmem_contract.models import ConversationEnded
from rushmem_tools.local import runtime as lambda_local
from tests.support.ingest import (
    TEMPLATE,
    ChatServer,
    Reply,
    chat_completion,
    conversation,
    failures,
    memories_answer,
    sqs_event,
    sqs_record,
)

TS: dict[str, Any] = {"content": "The user prefers TypeScript.", "category": "preference", "is_evergreen": True}
SVG: dict[str, Any] = {
    "content": "The user is building an SVG editor with live preview.",
    "category": "project",
    "is_evergreen": True,
}
RATE_LIMITED = Reply(
    429, {"error": {"message": "Rate limit reached", "type": "requests"}}, headers={"Retry-After": "0"}
)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Iterator[ChatServer]:
    """The handler configured for the openai provider against the local server (fast retries)."""
    with ChatServer() as server:
        for key, value in {
            "DATABASE_URL": database_url,
            "EMBEDDING_PROVIDER": "hash",
            "DB_ROLE": "agent_memory_app",
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": server.base_url,
            "LLM_API_KEY": "sk-test",
            "LLM_MODEL": "glm-4-flash",
            "HTTP_TIMEOUT_S": "0.5",
            "MAX_RETRIES": "2",
            "RETRY_BASE_DELAY_S": "0.01",
        }.items():
            monkeypatch.setenv(f"AGENT_MEMORY_{key}", value)
        yield server


def ingest(*bodies: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Invoke the handler; (all messageIds, failed messageIds)."""
    records = [sqs_record(b) for b in bodies]
    result = lambda_local.invoke(TEMPLATE, "IngestFunction", sqs_event(*records))
    return [r["messageId"] for r in records], failures(result)


def stored(service: Memory, user: str = "u-42") -> set[str]:
    return {m.content for m in service.list(user_id=user).memories}


# ---- openai: OpenAI-compatible chat completions over real HTTP ------------------------------


def test_extraction_calls_chat_completions_in_json_mode_and_stores_the_answer(llm: ChatServer, service: Memory) -> None:
    llm.script(Reply(body=memories_answer(TS, SVG)))
    _, failed = ingest(conversation())
    assert failed == []
    ((request),) = llm.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == "Bearer sk-test"
    body = request.json
    assert body["model"] == "glm-4-flash" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "third person" in body["messages"][0]["content"]
    assert "My stack is TypeScript." in body["messages"][1]["content"]
    memories = {m.content: m for m in service.list(user_id="u-42").memories}
    assert set(memories) == {TS["content"], SVG["content"]}
    assert memories[TS["content"]].metadata == {"extracted_by": "openai:glm-4-flash"}
    assert memories[TS["content"]].source == "c-1" and memories[TS["content"]].is_evergreen


def test_a_429_is_retried_after_retry_after_then_succeeds(llm: ChatServer, service: Memory) -> None:
    llm.script(RATE_LIMITED, Reply(body=memories_answer(TS)))
    assert ingest(conversation())[1] == []
    assert len(llm.requests) == 2 and stored(service) == {TS["content"]}


def test_a_timeout_is_retried_then_succeeds(llm: ChatServer, service: Memory) -> None:
    llm.script(Reply(body=memories_answer(TS), delay_s=1.5), Reply(body=memories_answer(TS)))
    assert ingest(conversation())[1] == []
    assert len(llm.requests) == 2 and stored(service) == {TS["content"]}


def test_a_provider_that_keeps_timing_out_fails_the_record_after_bounded_retries(
    llm: ChatServer, service: Memory
) -> None:
    llm.default = Reply(body=memories_answer(TS), delay_s=1.5)
    ids, failed = ingest(conversation(), conversation("u-77", messages=[], memories=[TS]))
    assert failed == ids[:1]  # the message that needed no LLM went through
    assert len(llm.requests) == 3  # the first try and max_retries=2 more
    assert stored(service) == set() and stored(service, "u-77") == {TS["content"]}
    # Nothing was recorded as read: the redelivery extracts again, and now it works.
    llm.default = Reply(body=memories_answer(SVG))
    assert ingest(conversation())[1] == []
    assert stored(service) == {SVG["content"]}


def test_5xx_is_retried_and_a_provider_down_fails_the_record(llm: ChatServer) -> None:
    down = Reply(503, {"error": {"message": "overloaded", "type": "server_error"}})
    llm.script(down, Reply(body=memories_answer(TS)))
    assert ingest(conversation())[1] == []
    llm.default = down
    ids, failed = ingest(conversation("u-2"))
    assert failed == ids and len(llm.requests) == 2 + 3


def test_a_rejected_key_is_not_retried(llm: ChatServer) -> None:
    llm.default = Reply(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
    ids, failed = ingest(conversation())
    assert failed == ids and len(llm.requests) == 1


def test_garbage_output_fails_the_record_and_stores_nothing(llm: ChatServer, service: Memory) -> None:
    llm.script(Reply(body=chat_completion("Sure! The user seems to like TypeScript a lot.")))
    ids, failed = ingest(conversation())
    assert failed == ids and stored(service) == set()
    llm.script(Reply(body={"id": "x", "object": "chat.completion", "choices": []}))
    assert ingest(conversation())[1] != []


def test_sloppy_output_keeps_the_valid_items(settings: Settings, llm: ChatServer) -> None:
    answer = "Here you go:\n```json\n" + json.dumps([TS, {"category": "fact"}, {"content": "   "}, SVG]) + "\n```"
    llm.script(Reply(body=chat_completion(answer, finish_reason="stop")))
    service = Memory(settings, extractor=create_extractor(Settings(**_openai_settings(llm))))
    outcome = service.ingest_conversation(ConversationEnded.model_validate(conversation()))
    assert (outcome.extracted, outcome.dropped, outcome.created) == (2, 2, 2)


def test_an_answer_cut_at_max_tokens_keeps_its_complete_items(settings: Settings, llm: ChatServer) -> None:
    cut = json.dumps({"memories": [TS, SVG]})[:-40]
    llm.script(Reply(body=chat_completion(cut, finish_reason="length")))
    service = Memory(settings, extractor=create_extractor(Settings(**_openai_settings(llm))))
    outcome = service.ingest_conversation(ConversationEnded.model_validate(conversation()))
    assert outcome.extracted == 1


def test_json_mode_can_be_turned_off_for_providers_without_it(llm: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_LLM_JSON_MODE", "false")
    llm.script(Reply(body=memories_answer(TS)))
    assert ingest(conversation())[1] == []
    assert "response_format" not in llm.requests[0].json


def _openai_settings(llm: ChatServer) -> dict[str, Any]:
    return {
        "llm_provider": "openai",
        "llm_base_url": llm.base_url,
        "llm_model": "glm-4-flash",
        "http_timeout_s": 0.5,
        "max_retries": 0,
    }


def test_provider_defaults_follow_the_endpoint() -> None:
    zhipu = Settings(llm_provider="openai", llm_base_url="https://open.bigmodel.cn/api/paas/v4", llm_api_key="k")
    extractor = create_extractor(zhipu)
    assert isinstance(extractor, OpenAIChatExtractor) and extractor.model == "glm-4-flash"
    openai = Settings(llm_provider="openai", openai_api_key="k")
    assert create_extractor(openai).model == "gpt-4o-mini"
    assert create_extractor(Settings()).fingerprint == "rules:heuristic-v1"


# ---- bedrock: the Converse API through botocore's Stubber -----------------------------------


@pytest.fixture
def bedrock_client(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return boto3.client("bedrock-runtime", region_name="us-east-1")


def converse_response(text: str, stop_reason: str = "end_turn") -> dict[str, Any]:
    """The documented Converse response shape."""
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop_reason,
        "usage": {"inputTokens": 412, "outputTokens": 58, "totalTokens": 470},
        "metrics": {"latencyMs": 640},
    }


def test_bedrock_converse_extracts_and_stores(settings: Settings, bedrock_client: Any) -> None:
    message = ConversationEnded.model_validate(conversation())
    system, user = build_prompt(message.messages, max_items=20, ended_at=message.ended_at)
    stubber = Stubber(bedrock_client)
    stubber.add_response(
        "converse",
        converse_response("```json\n" + json.dumps({"memories": [TS, SVG]}) + "\n```"),
        expected_params={
            "modelId": DEFAULT_MODEL,
            "system": [{"text": system}],
            "messages": [{"role": "user", "content": [{"text": user}]}],
            "inferenceConfig": {"maxTokens": 1024, "temperature": 0.0},
        },
    )
    service = Memory(settings, extractor=BedrockConverseExtractor(bedrock_client))
    with stubber:
        outcome = service.ingest_conversation(message)
    stubber.assert_no_pending_responses()
    assert (outcome.status, outcome.created) == ("stored", 2)
    assert stored(service) == {TS["content"], SVG["content"]}
    assert {m.metadata["extracted_by"] for m in service.list(user_id="u-42").memories} == {f"bedrock:{DEFAULT_MODEL}"}


def test_bedrock_throttling_is_retried_then_fails_the_message_without_writing(
    settings: Settings, bedrock_client: Any
) -> None:
    stubber = Stubber(bedrock_client)
    for _ in range(3):  # the first try and max_retries=2 more
        stubber.add_client_error(
            "converse", service_error_code="ThrottlingException", service_message="Too many requests",
            http_status_code=429,
        )  # fmt: skip
    stubber.add_response("converse", converse_response(json.dumps({"memories": [SVG]})))  # never reached
    retry = RetryPolicy(max_retries=2, base_delay_s=0.01)
    service = Memory(settings, extractor=BedrockConverseExtractor(bedrock_client, retry=retry))
    message = ConversationEnded.model_validate(conversation())
    with stubber, pytest.raises(ProviderError) as err:
        service.ingest_conversation(message)
    assert "ThrottlingException" in str(err.value) and "bedrock" in str(err.value) and DEFAULT_MODEL in str(err.value)
    assert stored(service) == set()
    stubber = Stubber(bedrock_client)
    stubber.add_client_error("converse", service_error_code="ThrottlingException", http_status_code=429)
    stubber.add_response("converse", converse_response(json.dumps({"memories": [TS]})))
    with stubber:  # the redelivery: one more throttle, retried, and the message is stored
        assert service.ingest_conversation(message).created == 1  # not marked as read by the failure
    stubber.assert_no_pending_responses()


def test_bedrock_answer_cut_at_max_tokens_keeps_complete_items(settings: Settings, bedrock_client: Any) -> None:
    stubber = Stubber(bedrock_client)
    stubber.add_response("converse", converse_response(json.dumps([TS, SVG])[:-25], stop_reason="max_tokens"))
    service = Memory(settings, extractor=BedrockConverseExtractor(bedrock_client))
    with stubber:
        outcome = service.ingest_conversation(ConversationEnded.model_validate(conversation()))
    assert outcome.extracted == 1


def test_bedrock_client_has_timeouts_and_bounded_retries() -> None:
    extractor = create_extractor(
        Settings(llm_provider="bedrock", bedrock_region="eu-west-1", http_timeout_s=7, max_retries=2)
    )
    assert isinstance(extractor, BedrockConverseExtractor) and extractor.model == DEFAULT_MODEL
    config = extractor._client.meta.config
    assert (config.read_timeout, config.connect_timeout) == (7, 7)
    # botocore makes one attempt per call; the shared policy retries (see the test below).
    assert config.retries == {"total_max_attempts": 1, "mode": "standard"}
    assert extractor._client.meta.region_name == "eu-west-1"


def test_ended_at_reaches_the_prompt() -> None:
    _, user = build_prompt([], max_items=5, ended_at=dt.datetime(2026, 11, 29, tzinfo=dt.UTC))
    assert "2026-11-29" in user


def test_bedrock_retries_are_bounded_over_real_http(monkeypatch: pytest.MonkeyPatch) -> None:
    # The client from settings, pointed at the local server: botocore's own retry loop runs.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with ChatServer() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.base_url.removesuffix("/v1"))
        server.default = Reply(
            503, {"message": "Bedrock is unavailable"}, headers={"x-amzn-ErrorType": "ServiceUnavailableException"}
        )
        extractor = create_extractor(
            Settings(llm_provider="bedrock", bedrock_region="us-east-1", max_retries=1, retry_base_delay_s=0.01)
        )
        with pytest.raises(ProviderError) as err:
            extractor.extract(ConversationEnded.model_validate(conversation()).messages)
        assert "ServiceUnavailableException" in str(err.value) and "gave up after 2 attempts" in str(err.value)
        assert len(server.requests) == 2
        assert server.requests[0].path == f"/model/{DEFAULT_MODEL.replace(':', '%3A')}/converse"


def test_the_chat_key_can_come_from_secrets_manager(monkeypatch: pytest.MonkeyPatch, llm: ChatServer) -> None:
    from moto import mock_aws

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.delenv("AGENT_MEMORY_LLM_API_KEY")
    monkeypatch.setenv("AGENT_MEMORY_OPENAI_API_KEY", "sk-embeddings")  # a different provider's key
    with mock_aws():
        arn = boto3.client("secretsmanager").create_secret(
            Name="agent-memory/zhipu", SecretString=json.dumps({"api_key": "sk-from-secret"})
        )["ARN"]
        monkeypatch.setenv("AGENT_MEMORY_LLM_API_KEY_SECRET_ARN", arn)
        llm.script(Reply(body=memories_answer(TS)))
        assert ingest(conversation())[1] == []
    assert llm.requests[0].headers["Authorization"] == "Bearer sk-from-secret"
