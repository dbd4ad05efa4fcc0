"""The write path against the real embedded PostgreSQL: IngestFunction through lambda_local
(the code path of `rushmem invoke`) and Memory.ingest_conversation."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import os
import socket
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.extraction import Extraction, Extractor
from rushmem.extraction.records import ExtractedMemory
from rushmem.records import ExistingMemory
from rushmem.service import Memory
from rushmem_contract.instructions import ExtractionInstructions
from rushmem_contract.models import ChatMessage, ConversationEnded, NewMemory
from rushmem_tools.local import runtime as lambda_local
from tests.support.db import rows
from tests.support.ingest import (
    APP,
    REPO,
    MeetingEmbedder,
    conversation,
    failures,
    in_lockstep,
    invoke_ingest_in_processes,
    sqs_event,
    sqs_record,
)
from tests.support.ingest import (
    invoke_ingest as invoke,
)

# The same behaviour on a connection and through the RDS Data API (tests/support/data_api.py).
pytestmark = pytest.mark.both_backends

EVENT = REPO / "events" / "conversation-ended.json"
MALFORMED = REPO / "events" / "conversation-ended-malformed.json"
SVG_FACTS = {
    "The user is building an SVG editor platform with live preview, code editing and export.",
    "The user's stack is TypeScript, with React for the UI.",
    "Every SVG modification must be synced to the defaultSVG variable, otherwise the preview and the exported "
    "file drift apart.",
}
QUERY = "Add an export-to-PNG button to the editor"


def snapshot(database_url: str) -> list[tuple[Any, ...]]:
    """Everything a write could change: the memories, their history and the receipts."""
    return (
        rows(database_url, "SELECT * FROM user_memories ORDER BY id")
        + rows(database_url, "SELECT * FROM memory_events ORDER BY id")
        + rows(database_url, "SELECT * FROM ingested_messages ORDER BY user_id, message_hash")
    )


def contents(database_url: str, user_id: str) -> list[str]:
    found = rows(database_url, "SELECT content FROM user_memories WHERE user_id = %s ORDER BY 1", user_id)
    return [r[0] for r in found]


# ---- the handler --------------------------------------------------------------------------


def test_the_article_event_stores_the_facts_and_recall_shows_them(lambda_env: str, service: Memory) -> None:
    assert failures(invoke(lambda_local.read_event(EVENT))) == []
    memories = service.list(user_id="u-42").memories
    assert {m.content for m in memories} >= SVG_FACTS
    svg = [m for m in memories if m.content in SVG_FACTS]
    assert {(m.source, m.project_id) for m in svg} == {("c-2026-11-29-0001", "svg-editor")}
    # Each fact is dated by the message that said it (valid from then); the conversation's end is
    # when it was last stated.
    said_at = {
        dt.datetime(2026, 11, 29, 10, minute, second, tzinfo=dt.UTC) for minute, second in ((2, 11), (3, 40), (5, 2))
    }
    assert {m.created_at for m in svg} <= said_at and all(m.valid_from == m.created_at for m in svg)
    assert all(m.updated_at == dt.datetime(2026, 11, 29, 10, 15, tzinfo=dt.UTC) for m in svg)
    assert all(m.metadata == {"extracted_by": "rules:heuristic-v1"} for m in svg)
    # Nothing the assistant said, no greeting, question or thanks became a memory.
    assert not any(w in m.content.lower() for m in memories for w in ("thank", "welcome", "parse", "undo", "great"))
    assert {m.content for m in service.list(user_id="u-77").memories} == {
        "The user's product is a PNG export service written in Go.",
        "The user prefers Python for every editor plugin.",
    }
    recalled = service.recall(QUERY, user_id="u-42", project_id="svg-editor")
    assert {m.content for m in recalled.memories[:2]} <= SVG_FACTS
    assert "defaultSVG" in recalled.prompt_block and "Go." not in recalled.prompt_block  # u-77's never shows


@pytest.mark.model
def test_make_demo_puts_the_svg_facts_on_top(monkeypatch: pytest.MonkeyPatch, blank_database_url: str) -> None:
    from rushmem_tools.local.demo import run_demo

    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", blank_database_url)  # the real local model
    monkeypatch.setenv("AGENT_MEMORY_DB_ROLE", APP)
    monkeypatch.delenv("RUSHMEM_MIN_RELATIVE_SCORE")  # the default relevance cut, as `make demo` runs
    out = io.StringIO()
    assert run_demo(out, root=REPO) == 0
    text = out.getvalue()
    assert '{"batchItemFailures": []}' in text
    table = text[text.index("score  category") : text.index("left out, below")].splitlines()[1:]
    recalled = [line.split(None, 2)[2] for line in table]
    # The article's SVG facts on top; the personal ones (near 0) left out of the block by the cut.
    assert recalled and set(recalled) <= SVG_FACTS, text
    left_out = text[text.index("left out, below") : text.index("System prompt block")].splitlines()[1:]
    assert all(float(line.split()[0]) < 0.6 * float(table[0].split()[0]) for line in left_out if line.strip())
    block = text[text.index("[RUSH_MEMORY]") :].rstrip()
    assert block.endswith("[/RUSH_MEMORY]") and "ramen" not in block and "Biscuit" not in block
    # The README shows the block exactly as the demo prints it.
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"```\n{block}\n```" in readme, block
    assert "PNG export service" not in text.split("New request")[1]
    # The handler ran quietly, and the caller's environment is as it was: its metrics still flow.
    assert "POWERTOOLS_METRICS_DISABLED" not in os.environ and "POWERTOOLS_LOG_LEVEL" not in os.environ


def test_a_poison_record_fails_alone(lambda_env: str, database_url: str) -> None:
    event = lambda_local.read_event(MALFORMED)
    poison = event["Records"][1]["messageId"]
    assert failures(invoke(event)) == [poison]
    assert contents(database_url, "u-100") == [
        "The user prefers dark mode.",
        "The user uses Vim keybindings everywhere.",
    ]
    assert contents(database_url, "u-101") == ["The billing service must keep invoices for ten years."]


def test_invalid_schema_and_oversized_messages_fail_only_their_records(
    lambda_env: str, monkeypatch: pytest.MonkeyPatch, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_MAX_MESSAGES_PER_CONVERSATION", "4")
    monkeypatch.setenv("AGENT_MEMORY_MAX_MESSAGE_CHARS", "500")
    turn = {"role": "user", "content": "I use Vim."}
    records = [
        sqs_record(conversation("ok-1")),
        sqs_record({"user_id": "", "messages": [turn]}),
        sqs_record(conversation("big-1", messages=[turn] * 5)),
        sqs_record(conversation("big-2", messages=[{"role": "user", "content": "I use Vim. " * 60}])),
        sqs_record(conversation("big-3", memories=[{"content": "x" * 2001}])),
        sqs_record("not json at all"),
        sqs_record(conversation("ok-2")),
    ]
    assert failures(invoke(sqs_event(*records))) == [r["messageId"] for r in records[1:6]]
    assert rows(database_url, "SELECT DISTINCT user_id FROM user_memories ORDER BY 1") == [("ok-1",), ("ok-2",)]
    # Each failure is logged with its messageId and what is wrong, naming the field.
    failed = [vars(r) for r in caplog.records if r.getMessage() == "record failed"]  # extras are attributes
    logged = {r["message_id"]: r["error"] for r in failed}
    assert list(logged) == [r["messageId"] for r in records[1:6]]
    reasons = list(logged.values())
    assert "user_id: String should have at least 1 character" in reasons[0]
    # The configured limits, worded as every door words an input over a limit.
    assert reasons[1] == "messages is 5 items; the limit is 4"
    assert reasons[2] == "messages[0].content is 660 characters; the limit is 500"
    assert reasons[3] == "memories[0].content is 2001 characters; the limit is 2000"
    assert "Invalid JSON" in reasons[4]


def test_a_redelivered_batch_changes_nothing(lambda_env: str, database_url: str) -> None:
    event = lambda_local.read_event(EVENT)
    assert failures(invoke(event)) == []
    before = snapshot(database_url)
    redelivered = json.loads(json.dumps(event))
    for record in redelivered["Records"]:
        record["attributes"]["ApproximateReceiveCount"] = "2"
        record["receiptHandle"] += "-2"
    assert failures(invoke(redelivered)) == []
    # The same body sent again as a new SQS message (new id, later SentTimestamp): also nothing.
    later = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    resent = sqs_event(*(sqs_record(r["body"], sent_at=later) for r in event["Records"]))
    assert failures(invoke(resent)) == []
    assert snapshot(database_url) == before


def test_without_ended_at_the_sqs_sent_time_dates_the_facts(lambda_env: str, service: Memory) -> None:
    body = conversation("u-1")
    del body["ended_at"]
    sent = dt.datetime(2026, 11, 2, 8, 30, tzinfo=dt.UTC)
    assert failures(invoke(sqs_event(sqs_record(body, sent_at=sent)))) == []
    (memory,) = service.list(user_id="u-1").memories
    assert memory.created_at == memory.updated_at == sent


def test_the_database_unreachable_fails_every_record_before_any_llm_call(
    monkeypatch: pytest.MonkeyPatch, lambda_env: str
) -> None:
    from tests.support.ingest import ChatServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", f"postgresql://postgres@127.0.0.1:{closed_port}/postgres")
    monkeypatch.setenv("AGENT_MEMORY_CONNECT_TIMEOUT_S", "1")
    with ChatServer() as llm:
        monkeypatch.setenv("AGENT_MEMORY_LLM_PROVIDER", "openai")
        monkeypatch.setenv("AGENT_MEMORY_LLM_BASE_URL", llm.base_url)
        event = lambda_local.read_event(EVENT)
        assert failures(invoke(event)) == [r["messageId"] for r in event["Records"]]
        assert llm.requests == []


def test_a_message_is_never_half_written(lambda_env: str, database_url: str) -> None:
    # A failure at the very end of the transaction (the receipt) must take the memories with it.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION fail_receipt() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'disk full (simulated)'; END $$"
        )
        conn.execute("CREATE TRIGGER fail_receipt BEFORE INSERT ON ingested_messages EXECUTE FUNCTION fail_receipt()")
    event = lambda_local.read_event(EVENT)
    assert failures(invoke(event)) == [r["messageId"] for r in event["Records"]]
    assert snapshot(database_url) == []
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER fail_receipt ON ingested_messages")
    assert failures(invoke(event)) == []  # the retry stores everything
    assert set(contents(database_url, "u-42")) >= SVG_FACTS


# ---- the service ---------------------------------------------------------------------------


def message(**fields: Any) -> ConversationEnded:
    return ConversationEnded.model_validate(conversation(**fields))


class RephrasingExtractor(Extractor):
    """An LLM stand-in that words the same fact differently on every call."""

    provider, model = "test", "rephrasing"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def _extract(
        self,
        messages: list[ChatMessage],
        ended_at: dt.datetime | None,
        existing: Sequence[ExistingMemory],
        instructions: ExtractionInstructions | None,
    ) -> Extraction:
        self.calls += 1
        text = f"The user's stack is TypeScript (take {self.calls})."
        return Extraction(memories=[ExtractedMemory(content=text, category="preference")])


def test_a_redelivery_never_reaches_the_llm_even_if_it_would_word_things_differently(
    settings: Settings, database_url: str
) -> None:
    extractor = RephrasingExtractor()
    service = Memory(settings, extractor=extractor)
    first = service.ingest_conversation(message())
    assert (first.status, first.extracted, first.created) == ("stored", 1, 1)
    again = service.ingest_conversation(message())
    assert again.status == "duplicate" and again.ids == [] and extractor.calls == 1
    assert contents(database_url, "u-42") == ["The user's stack is TypeScript (take 1)."]


def test_a_restated_fact_is_one_row_that_gets_fresher(service: Memory, database_url: str) -> None:
    first = service.ingest_conversation(message(conversation_id="c-1", ended_at="2026-11-01T00:00:00Z"))
    later = service.ingest_conversation(message(conversation_id="c-2", ended_at="2026-11-20T00:00:00Z"))
    assert (later.status, later.created, later.refreshed, later.ids) == ("stored", 0, 1, first.ids)
    ((count, created, updated, source),) = rows(
        database_url, "SELECT count(*), min(created_at), max(updated_at), min(source) FROM user_memories"
    )
    assert count == 1 and source == "c-1"
    assert (created.day, updated.day) == (1, 20)


def test_near_duplicates_refresh_the_existing_memory_through_the_write_path(database_url: str) -> None:
    settings = Settings(database_url=database_url, embedding_provider="hash", db_role=APP, near_duplicate_threshold=0.8)
    service = Memory(settings)
    given = [{"content": "The user prefers dark mode in every editor they use", "category": "preference"}]
    first = service.ingest_conversation(message(conversation_id="c-1", messages=[], memories=given))
    near = [{"content": "The user prefers dark mode in every editor they use daily", "category": "preference"}]
    second = service.ingest_conversation(message(conversation_id="c-2", messages=[], memories=near))
    assert (second.created, second.refreshed, second.ids) == (0, 1, first.ids)
    other_scope = service.ingest_conversation(
        message(conversation_id="c-3", project_id="p-1", messages=[], memories=near)
    )
    unrelated = service.ingest_conversation(
        message(conversation_id="c-4", messages=[], memories=[{"content": "The user has a cat named Pixel"}])
    )
    assert other_scope.created == 1 and unrelated.created == 1
    assert rows(database_url, "SELECT count(*) FROM user_memories")[0][0] == 3
    ((updated,),) = rows(database_url, "SELECT updated_at FROM user_memories WHERE id = %s", first.ids[0])
    assert updated == dt.datetime(2026, 11, 29, 10, 15, tzinfo=dt.UTC)


def test_client_memories_and_extracted_ones_are_stored_together_with_their_scope(service: Memory) -> None:
    outcome = service.ingest_conversation(
        message(
            project_id="svg-editor",
            memories=[
                {"content": "The user ships every Friday.", "category": "decision", "is_evergreen": True},
                {"content": "The user's team is called Pixels.", "project_id": "team", "metadata": {"k": 1}},
            ],
        )
    )
    assert (outcome.provided, outcome.extracted, outcome.created, outcome.dropped) == (2, 1, 3, 0)
    stored = {m.content: m for m in service.list(user_id="u-42").memories}
    assert stored["The user ships every Friday."].project_id == "svg-editor"
    assert stored["The user's team is called Pixels."].project_id == "team"
    assert stored["The user's team is called Pixels."].metadata == {"k": 1}
    assert stored["The user's stack is TypeScript."].category == "preference"
    assert {m.source for m in stored.values()} == {"c-1"}


def test_nothing_worth_keeping_is_a_success_and_is_remembered_as_read(service: Memory) -> None:
    chatter = [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello! How can I help?"}]
    outcome = service.ingest_conversation(message(messages=chatter))
    assert (outcome.status, outcome.created) == ("nothing_to_store", 0)
    assert service.ingest_conversation(message(messages=chatter)).status == "duplicate"


def test_extracted_memories_fill_only_the_room_left_by_the_clients(database_url: str) -> None:
    service = Memory(
        Settings(database_url=database_url, embedding_provider="hash", db_role=APP, max_memories_per_request=3)
    )
    turns = [{"role": "user", "content": f"I use tool number {i}."} for i in range(4)]
    given = [{"content": "The user ships every Friday."}, {"content": "The user works remotely."}]
    outcome = service.ingest_conversation(message(messages=turns, memories=given))
    assert (outcome.provided, outcome.extracted, outcome.dropped, outcome.created) == (2, 1, 3, 3)


def test_logging_at_info_level_does_not_break_writes(service: Memory, caplog: pytest.LogCaptureFixture) -> None:
    # "created" is a LogRecord attribute; passing it in `extra` raised KeyError at INFO level.
    with caplog.at_level(logging.INFO, logger="rushmem"):
        service.add([NewMemory(content="The user uses pnpm.")], user_id="u-1")
        service.ingest_conversation(message())
    assert "remembered" in caplog.text and "ingested" in caplog.text


# ---- concurrency ---------------------------------------------------------------------------


def deliver_at_once(database_url: str, batches: list[list[ConversationEnded]]) -> list[list[str]]:
    """Process one batch per thread, each with its own service and connection (two containers)."""
    results: list[list[str]] = [[] for _ in batches]

    def work(i: int, barrier: threading.Barrier) -> None:
        service = Memory(
            Settings(database_url=database_url, embedding_provider="hash", db_role=APP),
            embedder=MeetingEmbedder(barrier),
        )
        try:
            for item in batches[i]:
                results[i].append(service.ingest_conversation(item).status)
        finally:
            service.close()

    in_lockstep(len(batches), work)
    return results


def test_the_same_batch_delivered_twice_at_once_leaves_one_row_per_fact(database_url: str) -> None:
    event = lambda_local.read_event(EVENT)
    batch = [ConversationEnded.model_validate_json(r["body"]) for r in event["Records"]]
    first, second = deliver_at_once(database_url, [batch, batch])
    # For every message exactly one delivery wrote and the other found its receipt.
    assert all(set(pair) == {"stored", "duplicate"} for pair in zip(first, second, strict=True))
    assert rows(database_url, "SELECT count(*), count(DISTINCT (user_id, content_hash)) FROM user_memories") == [(9, 9)]
    assert rows(database_url, "SELECT count(*) FROM ingested_messages")[0][0] == 3


def test_two_conversations_with_the_same_facts_written_at_once_leave_one_row_per_fact(database_url: str) -> None:
    a = [message(conversation_id="c-a")]
    b = [message(conversation_id="c-b")]
    assert deliver_at_once(database_url, [a, b]) == [["stored"], ["stored"]]
    assert rows(database_url, "SELECT count(*) FROM user_memories") == [(1,)]
    assert rows(database_url, "SELECT count(*) FROM ingested_messages") == [(2,)]


def test_two_processes_invoking_the_same_event_at_once_leave_no_duplicate(database_url: str, tmp_path: Path) -> None:
    answers = invoke_ingest_in_processes(database_url, [EVENT, EVENT], timeout=120)
    assert answers == [{"batchItemFailures": []}] * 2
    assert rows(database_url, "SELECT count(*), count(DISTINCT (user_id, content_hash)) FROM user_memories") == [(9, 9)]


def test_receipts_are_behind_row_level_security(lambda_env: str, database_url: str) -> None:
    assert failures(invoke(lambda_local.read_event(EVENT))) == []
    with psycopg.connect(database_url, autocommit=True) as conn, conn.transaction():
        conn.execute(f"SET LOCAL ROLE {APP}")
        assert conn.execute("SELECT count(*) FROM ingested_messages").fetchone() == (0,)  # no user scope: nothing
        conn.execute("SELECT set_config('agent_memory.user_id', 'u-77', true)")
        assert conn.execute("SELECT user_id, conversation_id FROM ingested_messages").fetchall() == [
            ("u-77", "c-2026-11-28-0042")
        ]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO ingested_messages (user_id, message_hash, memories) VALUES ('u-42', 'x', 0)")
