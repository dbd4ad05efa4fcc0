"""The usage meter and what each provider reports into it (tokens where the provider says them),
the price of a usage line, and the EventBridge publisher (botocore's Stubber): no I/O."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.response import StreamingBody
from botocore.stub import Stubber

from rushmem import prices
from rushmem.embeddings.bedrock import BedrockEmbedder
from rushmem.embeddings.hashing import HashEmbedder
from rushmem.embeddings.openai import OpenAIEmbedder
from rushmem.extraction.bedrock import BedrockConverseExtractor
from rushmem.extraction.openai import OpenAIChatExtractor
from rushmem.providers.eventbridge import MAX_ENTRIES, EventBridgePublisher
from rushmem.providers.http import OpenAICompatClient
from rushmem.providers.retry import RetryPolicy
from rushmem.usage import Meter, metering, record_usage
from rushmem_contract.models import ChatMessage

FACTS = json.dumps({"memories": [{"content": "The user prefers TypeScript", "category": "preference"}]})


def _client(service: str) -> Any:
    make: Any = boto3.client  # the stubs type each service name; any is fine here
    return make(
        service,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )


@pytest.fixture
def bedrock() -> Iterator[tuple[Any, Stubber]]:
    client = _client("bedrock-runtime")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_the_meter_counts_by_kind_and_model_in_a_fixed_order() -> None:
    meter = Meter()
    meter.add("recall", calls=1, characters=10)
    meter.add("embedding", "m", calls=1, input_tokens=5, items=1)
    meter.add("embedding", "m", calls=2, input_tokens=7, items=2)
    assert [(r.kind, r.model, r.count.calls, r.count.input_tokens) for r in meter.rows()] == [
        ("embedding", "m", 3, 12),
        ("recall", "", 1, 0),
    ]
    part = meter.share(0.25)
    assert [(r.kind, r.count.calls, r.count.input_tokens, r.count.items) for r in part.rows()] == [
        ("embedding", 1, 3, 1),  # a call that served the user counts once
        ("recall", 1, 0, 0),
    ]


def test_recording_outside_an_operation_goes_nowhere_and_operations_do_not_mix() -> None:
    record_usage("llm", "x", calls=1)  # no meter: nothing, no error
    seen: dict[str, list[tuple[str, int]]] = {}

    def work(name: str) -> None:
        with metering() as meter:
            for _ in range(50):
                record_usage("llm", name, calls=1)
        seen[name] = [(r.model, r.count.calls) for r in meter.rows()]

    threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": [("a", 50)], "b": [("b", 50)]}


def test_an_embedder_counts_its_requests_texts_and_characters() -> None:
    embedder = HashEmbedder(dimension=16)
    embedder.batch_size = 2
    with metering() as meter:
        embedder.embed(["one", "two", "three"])
    (row,) = meter.rows()
    assert (row.kind, row.model) == ("embedding", "hash:feature-hash-v1:16")
    assert (row.count.calls, row.count.items, row.count.characters) == (2, 3, 11)


def _openai(handler: Any) -> OpenAICompatClient:
    return OpenAICompatClient(
        "openai", "http://llm.test/v1", "k", timeout_s=5, retry=RetryPolicy(max_retries=0), transport=handler
    )


def test_openai_chat_reports_its_tokens() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"content": FACTS}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 812, "completion_tokens": 47, "total_tokens": 859},
            },
        )

    extractor = OpenAIChatExtractor(_openai(httpx.MockTransport(answer)), "gpt-4o-mini")
    with metering() as meter:
        extractor.extract([ChatMessage(role="user", content="I prefer TypeScript")])
    (row,) = meter.rows()
    assert (row.kind, row.model) == ("llm", "openai:gpt-4o-mini")
    assert (row.count.calls, row.count.input_tokens, row.count.output_tokens) == (1, 812, 47)
    assert row.count.characters > len("I prefer TypeScript")  # the whole prompt sent


def test_openai_embeddings_report_their_tokens() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["input"]
        data = [{"index": i, "embedding": [1.0, 0.0, 0.0]} for i in range(len(texts))]
        return httpx.Response(200, json={"data": data, "usage": {"prompt_tokens": 9, "total_tokens": 9}})

    embedder = OpenAIEmbedder(_openai(httpx.MockTransport(answer)), model="m", dimensions=3)
    with metering() as meter:
        embedder.embed(["tea", "coffee"])
    (row,) = meter.rows()
    assert (row.count.calls, row.count.input_tokens, row.count.items, row.count.characters) == (1, 9, 2, 9)


def test_titan_reports_its_tokens_and_is_one_request_per_text(bedrock: tuple[Any, Stubber]) -> None:
    client, stubber = bedrock
    for tokens in (3, 4):
        body = json.dumps({"embedding": [0.5] * 256, "inputTextTokenCount": tokens}).encode()
        stubber.add_response(
            "invoke_model", {"body": StreamingBody(io.BytesIO(body), len(body)), "contentType": "application/json"}
        )
    embedder = BedrockEmbedder(client, dimensions=256, retry=RetryPolicy(max_retries=0))
    with metering() as meter:
        embedder.embed(["green tea", "black coffee"])
    (row,) = meter.rows()
    assert (row.count.calls, row.count.input_tokens, row.count.items) == (2, 7, 2)


def test_converse_reports_its_tokens(bedrock: tuple[Any, Stubber]) -> None:
    client, stubber = bedrock
    stubber.add_response(
        "converse",
        {
            "output": {"message": {"role": "assistant", "content": [{"text": FACTS}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 900, "outputTokens": 60, "totalTokens": 960},
            "metrics": {"latencyMs": 100},
        },
    )
    extractor = BedrockConverseExtractor(client, retry=RetryPolicy(max_retries=0))
    with metering() as meter:
        extractor.extract([ChatMessage(role="user", content="I prefer TypeScript")])
    (row,) = meter.rows()
    assert (row.kind, row.count.calls, row.count.input_tokens, row.count.output_tokens) == ("llm", 1, 900, 60)


def test_a_usage_line_is_priced_from_the_one_table() -> None:
    p = prices.DEFAULT_PRICES
    llm = prices.usage_cost("llm", "bedrock:x", calls=1, input_tokens=1000, output_tokens=100, characters=0)
    assert llm == pytest.approx(p.chat_input_tokens.cost(1000) + p.chat_output_tokens.cost(100))
    # No tokens reported: four characters a token, and the assumed answer length.
    guessed = prices.usage_cost("llm", "openai:x", calls=1, input_tokens=0, output_tokens=0, characters=4000)
    answer = prices.UsageAssumptions().extraction_output_tokens
    assert guessed == pytest.approx(p.chat_input_tokens.cost(1000) + p.chat_output_tokens.cost(answer))
    assert prices.usage_cost("embedding", "local:all-MiniLM-L6-v2:384", calls=5, input_tokens=0, output_tokens=0,
                            characters=900) == 0  # fmt: skip
    titan = prices.usage_cost("embedding", "bedrock:t:1024", calls=1, input_tokens=50, output_tokens=0, characters=0)
    assert titan == pytest.approx(p.embedding_input_tokens.cost(50))
    # Comprehend bills at least three units a request.
    assert prices.usage_cost("pii", "comprehend", calls=2, input_tokens=0, output_tokens=0, characters=120) == (
        pytest.approx(p.comprehend_pii_units.cost(6))
    )
    recall = prices.usage_cost("recall", "", calls=1000, input_tokens=0, output_tokens=0, characters=0)
    assert 0 < recall < prices.usage_cost("conversation", "", calls=1000, input_tokens=0, output_tokens=0, characters=0)


@pytest.fixture
def events() -> Iterator[tuple[Any, Stubber]]:
    client = _client("events")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_the_publisher_sends_ten_entries_a_request_and_says_which_failed(events: tuple[Any, Stubber]) -> None:
    client, stubber = events
    entries = [("memory.created", json.dumps({"n": i})) for i in range(12)]
    first = [{"EventId": f"e{i}"} for i in range(MAX_ENTRIES)]
    first[3] = {"ErrorCode": "ThrottlingException", "ErrorMessage": "slow down"}
    stubber.add_response(
        "put_events",
        {"FailedEntryCount": 1, "Entries": first},
        expected_params={
            "Entries": [
                {"Source": "agent-memory", "DetailType": k, "Detail": d, "EventBusName": "bus"}
                for k, d in entries[:MAX_ENTRIES]
            ]
        },
    )
    stubber.add_client_error("put_events", "AccessDeniedException", "not allowed", 400)
    results = EventBridgePublisher(client, bus="bus", source="agent-memory").publish(entries)
    assert results[:3] == [None] * 3
    assert results[3] == "ThrottlingException: slow down"
    assert results[10:] == ["AccessDeniedException: not allowed"] * 2


# ---- counts kept in the container (reads on a reader endpoint) ------------------------------


def test_the_usage_buffer_is_due_by_count_or_age_and_keeps_each_day() -> None:
    import datetime as dt

    from rushmem.usage import UsageBuffer, UsageCount, UsageRow

    now = [100.0]
    buffer = UsageBuffer(
        max_pending=3, max_age_s=30.0, write=lambda pending: None, kept=lambda exc: True, clock=lambda: now[0]
    )
    recall = [UsageRow("recall", "", UsageCount(calls=1, characters=12))]
    monday, tuesday = dt.date(2026, 3, 2), dt.date(2026, 3, 3)
    assert not buffer.due()
    buffer.add("u1", monday, recall)
    buffer.add("u1", tuesday, recall)
    assert not buffer.due()
    now[0] += 30.0  # the oldest has waited long enough
    assert buffer.due()
    now[0] -= 30.0
    buffer.add("u1", tuesday, recall)
    assert buffer.due() and len(buffer) == 3  # enough are waiting
    taken = buffer.take()
    assert [(p.user_id, p.day, p.rows[0].count.calls, p.rows[0].count.characters) for p in taken] == [
        ("u1", monday, 1, 12),
        ("u1", tuesday, 2, 24),
    ]
    assert len(buffer) == 0 and not buffer.due() and buffer.take() == []
    buffer.put_back(taken)  # a flush that could not reach the writer
    assert [(p.day, p.rows[0].count.calls) for p in buffer.take()] == [(monday, 1), (tuesday, 2)]
