"""How the SQL is sent and planned, where it costs milliseconds (found with `rushmem bench`):
vectors go in binary, and recall is planned with its own values even once prepared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from pgvector.psycopg.vector import VectorBinaryDumper, VectorDumper
from psycopg.types import TypeInfo

from rushmem.config import Settings
from rushmem.extraction import create_extractor
from rushmem.service import Memory
from rushmem.store.engine.pg import PgSession
from rushmem.store.engine.transactions import read_as_user
from rushmem_contract.models import ConversationEnded, NewMemory
from tests.support.db import round_trips
from tests.support.ingest import ChatServer, Reply, memories_answer


class _TextRefused(VectorDumper):
    def dump(self, obj: Any) -> bytes:
        raise AssertionError("a vector was sent to PostgreSQL as text")


@pytest.fixture
def binary_only(service: Memory) -> Memory:
    """The service's connection with the text form of vectors refused (binary still works)."""
    conn = service.admin.db.connection()
    assert isinstance(conn, PgSession)  # psycopg's adapters
    info = TypeInfo.fetch(conn, "vector")
    assert info is not None
    refused = type("TextRefused", (_TextRefused,), {"oid": info.oid})
    binary = type("Binary", (VectorBinaryDumper,), {"oid": info.oid})
    conn.adapters.register_dumper("numpy.ndarray", refused)
    conn.adapters.register_dumper("numpy.ndarray", binary)  # registered last: what %s picks for one vector
    return service


def test_remember_sends_its_vectors_in_binary(binary_only: Memory) -> None:
    facts = ["Prefers TypeScript", "Lives in Lisbon", "Has a dog named Biscuit"]
    # The near-duplicate check and the upsert both pass the batch's vectors as an array.
    first = binary_only.add([NewMemory(content=f) for f in facts], user_id="u1")
    again = binary_only.add([NewMemory(content=f + "!") for f in facts], user_id="u1")  # restated: folds
    assert first.created == 3 and again.created == 0
    assert binary_only.recall("TypeScript", user_id="u1").memories[0].content == "Prefers TypeScript"


def test_recall_keeps_planning_with_the_querys_own_values(service: Memory) -> None:
    # psycopg prepares a statement after 5 runs; PostgreSQL would then move to a generic plan
    # in which the text query is re-parsed for every candidate row. Recall must stay on
    # custom plans (the tsquery folded to a constant).
    service.add([NewMemory(content=f"Fact number {i} about TypeScript") for i in range(20)], user_id="u1")
    for i in range(12):
        service.recall(f"What about TypeScript fact {i}?", user_id="u1")
    conn = service.admin.db.connection()
    plans = conn.execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%websearch_to_tsquery%'"
    ).fetchall()
    assert plans, "the recall statement was never prepared: the test no longer exercises plan caching"
    assert all(generic == 0 for generic, _custom in plans)


def test_a_recall_is_one_round_trip_to_the_database(service: Memory, tmp_path: Path) -> None:
    # Between Lambda and RDS Proxy each round trip costs about a millisecond: BEGIN, the
    # user scope, the query and COMMIT go out together.
    service.add([NewMemory(content=f"Fact {i} about the SVG editor") for i in range(40)], user_id="u1")
    result: list[Any] = []
    assert round_trips(service, lambda: result.append(service.recall("SVG editor", user_id="u1")), tmp_path) == 1
    assert len(result[0].memories) == 10


def test_a_conversation_is_written_in_four_round_trips(service: Memory, tmp_path: Path) -> None:
    # Was 15: BEGIN, COMMIT, a savepoint and the exact-duplicate check each waited on their
    # own; then 6. Now: the redelivery pre-check before extraction (1, its BEGIN and COMMIT
    # included), the project's extraction instructions (1, likewise), BEGIN with the scope, lock,
    # receipt check and near-duplicate read (1), the upsert with the receipt and COMMIT (1, the
    # upsert's ids read after COMMIT).
    service.add([NewMemory(content=f"Fact {i} about the SVG editor") for i in range(10)], user_id="u1")
    conversation = ConversationEnded.model_validate(
        {
            "user_id": "u1",
            "conversation_id": "c1",
            "messages": [
                {"role": "user", "content": "I prefer TypeScript for everything."},
                {"role": "user", "content": "All SVG changes must sync to defaultSVG."},
            ],
        }
    )
    outcome: list[Any] = []
    trips = round_trips(service, lambda: outcome.append(service.ingest_conversation(conversation)), tmp_path)
    assert outcome[0].created == 2
    assert trips == 4


def test_an_llm_extraction_reads_the_related_memories_in_one_round_trip(settings: Settings, tmp_path: Path) -> None:
    # An LLM extractor is shown the user's memories most related to the conversation: one more
    # round trip (BEGIN, the scope, the read and COMMIT go out together; it was three) on top of
    # the four of a conversation with an extraction.
    with ChatServer() as chat:
        llm: dict[str, Any] = {
            "llm_provider": "openai",
            "llm_base_url": chat.base_url,
            "llm_api_key": "sk-test",
            "max_retries": 0,
        }
        service = Memory(settings.model_copy(update=llm), extractor=create_extractor(Settings(**llm)))
        try:
            service.add([NewMemory(content=f"Fact {i} about the SVG editor") for i in range(10)], user_id="u1")
            chat.replies.append(Reply(body=memories_answer({"content": "The user prefers TypeScript."})))
            conversation = ConversationEnded.model_validate(
                {"user_id": "u1", "messages": [{"role": "user", "content": "I prefer TypeScript for the SVG editor."}]}
            )
            outcome: list[Any] = []
            trips = round_trips(service, lambda: outcome.append(service.ingest_conversation(conversation)), tmp_path)
        finally:
            service.close()
    assert outcome[0].created == 1
    assert "about the SVG editor" in chat.requests[0].json["messages"][1]["content"]  # stored facts shown to the model
    assert trips == 5


def test_a_message_that_carries_its_memories_is_written_in_two_round_trips(service: Memory, tmp_path: Path) -> None:
    # The IngestFunction's common case (was 5): no extraction to save, so no pre-check; the
    # receipt is checked under the lock, in the same round trip as the near-duplicate read.
    service.add([NewMemory(content=f"Fact {i} about the SVG editor") for i in range(10)], user_id="u1")
    facts = [{"content": f"Prefers tool number {i} for diagrams"} for i in range(10)]
    facts.append({"content": "Fact 3 about the SVG editor!"})  # a restatement: folds into the stored fact
    message = ConversationEnded.model_validate({"user_id": "u1", "conversation_id": "c2", "memories": facts})
    outcome: list[Any] = []
    trips = round_trips(service, lambda: outcome.append(service.ingest_conversation(message)), tmp_path)
    assert (outcome[0].status, outcome[0].created, outcome[0].refreshed) == ("stored", 10, 1)
    assert trips == 2
    # A redelivery is still a no-op, found under the lock: the same two round trips, nothing written.
    again: list[Any] = []
    assert round_trips(service, lambda: again.append(service.ingest_conversation(message)), tmp_path) == 2
    assert again[0].status == "duplicate"
    assert len(service.list(user_id="u1", limit=100).memories) == 20


def test_a_message_whose_fact_updates_a_stored_value_waits_once_more(service: Memory, tmp_path: Path) -> None:
    # The new memory's id is read before COMMIT, to supersede the old value with it.
    service.add([NewMemory(content="The user is 41 years old.")], user_id="u1")
    message = ConversationEnded.model_validate(
        {"user_id": "u1", "conversation_id": "c3", "memories": [{"content": "The user is 42 years old."}]}
    )
    outcome: list[Any] = []
    trips = round_trips(service, lambda: outcome.append(service.ingest_conversation(message)), tmp_path)
    assert (outcome[0].created, outcome[0].superseded) == (1, 1)
    assert trips == 3
    assert [m.content for m in service.list(user_id="u1").memories] == ["The user is 42 years old."]


def test_with_pipelining_off_the_same_work_waits_for_every_statement(settings: Settings, tmp_path: Path) -> None:
    # AGENT_MEMORY_DB_PIPELINE=false, for a proxy that mishandles pipelined requests.
    service = Memory(settings.model_copy(update={"db_pipeline": False}))
    try:
        service.add([NewMemory(content=f"Fact {i} about the SVG editor") for i in range(40)], user_id="u1")
        result: list[Any] = []
        assert round_trips(service, lambda: result.append(service.recall("SVG editor", user_id="u1")), tmp_path) == 4
        assert len(result[0].memories) == 10
        conversation = ConversationEnded.model_validate(
            {"user_id": "u1", "messages": [{"role": "user", "content": "I prefer TypeScript for everything."}]}
        )
        outcome: list[Any] = []
        trips = round_trips(service, lambda: outcome.append(service.ingest_conversation(conversation)), tmp_path)
        assert outcome[0].created == 1
        assert trips > 6
    finally:
        service.close()


def test_a_failed_recall_leaves_the_connection_usable(service: Memory) -> None:
    service.add([NewMemory(content="Prefers TypeScript")], user_id="u1")
    conn = service.admin.db.connection()
    assert isinstance(conn, PgSession)
    with pytest.raises(psycopg.errors.UndefinedColumn):
        read_as_user(conn, "u1", "SELECT no_such_column FROM user_memories", {})
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert [m.content for m in service.recall("TypeScript", user_id="u1").memories] == ["Prefers TypeScript"]
