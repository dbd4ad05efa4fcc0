"""Usage per tenant: recalls, conversations, writes and provider calls counted per user and day,
in the same transaction as the work; read back with its estimated cost."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rushmem import prices
from rushmem.config import Settings
from rushmem.service import Memory
from rushmem.store.accounts.usage import add_usage
from rushmem.store.memories import writes
from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import ConversationEnded, NewMemory, RecallQuery
from rushmem_tools import costs
from rushmem_tools.cli import main
from tests.support.db import round_trips


def _lines(service: Memory, user: str) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(kind, model) -> (calls, characters, items) of today's usage."""
    return {(ln.kind, ln.model): (ln.calls, ln.characters, ln.items) for ln in service.usage(user).lines}


def test_each_recall_counts_its_call_and_its_query_embedding(service: Memory, tmp_path: Path) -> None:
    # 40 memories: enough for the index leg to fill k = 30 (else recall adds its exact second statement).
    facts = [f"Fact {i} about the SVG editor" for i in range(40)]
    service.add([NewMemory(content=f) for f in facts], user_id="u1")
    embedder = service.admin.embedder.fingerprint
    before = _lines(service, "u1")
    assert before[("write", "")] == (1, 0, 40)
    assert before[("embedding", embedder)] == (1, sum(map(len, facts)), 40)
    for query in ("SVG editor", "Which editor?"):
        service.recall(query, user_id="u1")
    # Still one round trip with the usage written: the count rides in the recall's own statement.
    assert round_trips(service, lambda: service.recall("editor", user_id="u1"), tmp_path) == 1
    after = _lines(service, "u1")
    chars = len("SVG editor") + len("Which editor?") + len("editor")
    assert after[("recall", "")] == (3, chars, 0)
    assert after[("embedding", embedder)] == (4, before[("embedding", embedder)][1] + chars, 43)
    assert service.usage("u2").lines == []  # per user


def test_a_conversation_counts_once_with_its_embeddings(service: Memory) -> None:
    message = ConversationEnded.model_validate(
        {"user_id": "u1", "conversation_id": "c1", "messages": [{"role": "user", "content": "I prefer TypeScript."}]}
    )
    service.ingest_conversation(message)
    service.ingest_conversation(message)  # a redelivery: no new work, nothing counted
    lines = _lines(service, "u1")
    assert lines[("conversation", "")] == (1, 0, 1)
    assert lines[("embedding", service.admin.embedder.fingerprint)][0] == 1


def test_usage_is_written_in_the_same_transaction_as_the_work(service: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    def then_fail(*args: Any, **kwargs: Any) -> None:
        add_usage(*args, **kwargs)
        raise RuntimeError("the write failed after counting")

    monkeypatch.setattr(writes, "add_usage", then_fail)
    with pytest.raises(RuntimeError):
        service.add([NewMemory(content="Prefers tea")], user_id="u1")
    # Neither the memory nor its count: both or neither.
    assert service.list(user_id="u1").memories == []
    assert service.usage("u1").lines == []


def test_the_usage_report_prices_each_line_and_sums_it(service: Memory) -> None:
    service.add([NewMemory(content="Prefers tea")], user_id="u1")
    service.recall("tea", user_id="u1")
    report = service.usage("u1")
    assert report.start == report.end - dt.timedelta(days=29) and report.end == dt.datetime.now(dt.UTC).date()
    recall = next(line for line in report.lines if line.kind == "recall")
    expected = prices.usage_cost("recall", "", calls=1, input_tokens=0, output_tokens=0, characters=3)
    assert recall.estimated_usd == round(expected, 6) and recall.estimated_usd > 0
    # hash embeddings run in the function: no provider cost.
    assert all(line.estimated_usd == 0 for line in report.lines if line.kind == "embedding")
    assert report.estimated_usd == pytest.approx(sum(line.estimated_usd for line in report.lines), abs=1e-6)
    assert report.totals == {"embedding": 2, "recall": 1, "write": 1}


def test_a_period_is_checked(service: Memory) -> None:
    with pytest.raises(InvalidInput) as reversed_period:
        service.usage("u1", start=dt.date(2025, 3, 2), end=dt.date(2025, 3, 1))
    assert reversed_period.value.field == "start"
    with pytest.raises(InvalidInput):
        service.usage("u1", start=dt.date(2020, 1, 1), end=dt.date(2025, 1, 1))
    # The default start of an end in the first days of year 1 is year 1 (was an OverflowError, a 500).
    assert service.usage("u1", end=dt.date(1, 1, 3)).start == dt.date(1, 1, 1)


def test_days_outside_the_period_are_left_out(service: Memory, database_url: str) -> None:
    service.recall("anything", user_id="u1")
    with psycopg.connect(database_url) as owner:
        owner.execute("INSERT INTO usage_daily (user_id, day, kind, calls) VALUES ('u1', '2024-01-05', 'recall', 7)")
    old = service.usage("u1", start=dt.date(2024, 1, 1), end=dt.date(2024, 1, 31))
    assert [(line.day, line.calls) for line in old.lines] == [(dt.date(2024, 1, 5), 7)]
    assert sum(line.calls for line in service.usage("u1").lines if line.kind == "recall") == 1


def test_batch_recall_shares_the_batch_embedding_among_its_users(service: Memory) -> None:
    service.recall_batch([RecallQuery(user_id="a", query="tea please"), RecallQuery(user_id="b", query="coffee")])
    fingerprint = service.admin.embedder.fingerprint
    assert _lines(service, "a")[("embedding", fingerprint)] == (1, len("tea please"), 1)
    assert _lines(service, "b")[("embedding", fingerprint)] == (1, len("coffee"), 1)


def test_metering_can_be_turned_off(settings: Settings) -> None:
    service = Memory(settings.model_copy(update={"usage_metering": False}))
    try:
        service.add([NewMemory(content="Prefers tea")], user_id="u1")
        service.recall("tea", user_id="u1")
        assert service.usage("u1").lines == []
    finally:
        service.close()


def test_every_users_totals_for_the_operator(service: Memory) -> None:
    service.recall("x", user_id="cheap")
    for _ in range(3):
        service.recall("what does the user like?", user_id="busy")
    tenants = service.admin.usage_by_user()
    assert [t.user_id for t in tenants] == ["busy", "cheap"]
    assert tenants[0].calls["recall"] == 3 and tenants[0].estimated_usd > tenants[1].estimated_usd


def test_usage_and_cost_commands(lambda_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    settings = Settings(database_url=lambda_env, embedding_provider="hash", db_role="agent_memory_app")
    assert main(["recall", "--user", "u1", "anything"], settings=settings) == 0
    capsys.readouterr()
    assert main(["usage", "--user", "u1"], settings=settings) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["user_id"] == "u1" and report["totals"]["recall"] == 1
    assert main(["cost", "--conversations", "1000", "--recalls", "1000"], settings=settings) == 0
    table = capsys.readouterr().out
    assert "Monthly cost for 1,000 conversations/day and 1,000 recalls/day" in table
    assert "Assumptions:" in table and "Prices:" in table
    assert main(["cost", "--conversations", "1000", "--recalls", "1000", "--json"], settings=settings) == 0
    estimate = json.loads(capsys.readouterr().out)
    # Bare `cost` is the README's deployment (the quickstart profile).
    quickstart = costs.CostAssumptions(**costs.PRESETS[costs.DEFAULT_PRESET])
    assert estimate["total_usd"] == round(costs.monthly_cost(1000, 1000, assumptions=quickstart).total_usd, 2)


def test_a_patch_answered_404_counts_no_write(lambda_env: str) -> None:
    """Through RecallFunction: a PATCH of a memory the user does not have (another user's, or none)
    changes nothing, so it counts nothing; the one that changes a memory counts its write."""
    import uuid

    from tests.support.recall import body_of, invoke, with_body, with_request

    def usage(user: str) -> dict[str, int]:
        report = body_of(invoke(with_request("http-usage.json", "GET", "/usage", {"user_id": user})))
        return {line["kind"]: line["calls"] for line in report["lines"]}

    (theirs,) = body_of(
        invoke(with_body("http-memories-add.json", {"user_id": "u-other", "memories": [{"content": "Likes tea"}]}))
    )["ids"]
    for memory_id in (theirs, str(uuid.uuid4())):
        patch = with_request("http-memory-get.json", "PATCH", f"/memories/{memory_id}", {"user_id": "u-patch"})
        answer = invoke(with_body(patch, {"content": "Likes coffee"}))
        assert answer["statusCode"] == 404, answer
    assert usage("u-patch") == {}
    (own,) = body_of(
        invoke(with_body("http-memories-add.json", {"user_id": "u-patch", "memories": [{"content": "Likes tea"}]}))
    )["ids"]
    patch = with_request("http-memory-get.json", "PATCH", f"/memories/{own}", {"user_id": "u-patch"})
    assert invoke(with_body(patch, {"content": "Likes coffee"}))["statusCode"] == 200
    assert usage("u-patch")["write"] == 2
