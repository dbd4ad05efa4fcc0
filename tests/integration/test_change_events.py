"""Change events: written to the outbox in the changing transaction, put on an EventBridge bus
(moto) after commit; a failed publish loses nothing and fails no write."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from typing import Any

import boto3
import psycopg
import pytest
from moto import mock_aws

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem_contract.models import ConversationEnded, NewMemory

BUS = "agent-memory-test"


@pytest.fixture
def bus(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A moto EventBridge bus with a rule that copies every event to an SQS queue we can read."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        events = boto3.client("events", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        events.create_event_bus(Name=BUS)
        queue_url = sqs.create_queue(QueueName="changes")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name="all", EventBusName=BUS, EventPattern=json.dumps({"source": ["agent-memory"]}))
        events.put_targets(Rule="all", EventBusName=BUS, Targets=[{"Id": "q", "Arn": arn}])
        yield sqs, queue_url


def received(bus: Any) -> list[dict[str, Any]]:
    """Every event the bus delivered so far (EventBridge's envelope, with ``detail``)."""
    sqs, queue_url = bus
    out: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return out
        for message in messages:
            out.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


@pytest.fixture
def publishing(settings: Settings, bus: Any) -> Iterator[Memory]:
    service = Memory(settings.model_copy(update={"event_bus": BUS}))
    yield service
    service.close()


def _outbox(database_url: str) -> list[tuple[str, str, int]]:
    with psycopg.connect(database_url) as owner:
        rows = owner.execute("SELECT user_id, event, attempts FROM change_outbox ORDER BY id").fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def test_created_refreshed_forgotten_and_erased_reach_the_bus_with_ids_not_content(
    publishing: Memory, bus: Any, database_url: str
) -> None:
    stored = publishing.add([NewMemory(content="Prefers green tea", category="preference")], user_id="u1")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
    publishing.add([NewMemory(content="prefers green tea.")], user_id="u1", observed_at=later)
    (memory_id,) = stored.ids
    publishing.delete(memory_id, user_id="u1")
    publishing.add([NewMemory(content="Lives in Porto")], user_id="u1")
    receipt = publishing.forget_user("u1")
    events = received(bus)
    kinds = [e["detail-type"] for e in events]
    assert kinds == ["memory.created", "memory.refreshed", "memory.forgotten", "memory.created", "user.erased"]
    assert {e["source"] for e in events} == {"agent-memory"}
    first = events[0]["detail"]
    assert first["memory_id"] == str(memory_id) and first["user_id"] == "u1" and first["category"] == "preference"
    assert all("content" not in e["detail"] for e in events)
    assert "Prefers green tea" not in json.dumps(events)
    erased = events[-1]["detail"]
    assert erased["erasure_id"] == str(receipt.id) and erased["deleted"]["memories"] == 1
    # One event per change: the forgotten user's one memory sends no 'forgotten' of its own.
    assert sum(1 for k in kinds if k == "memory.forgotten") == 1
    assert _outbox(database_url) == []  # published events leave the outbox


def test_supersession_expiry_and_purge(publishing: Memory, bus: Any) -> None:
    now = dt.datetime.now(dt.UTC)
    old, new = publishing.add(
        [
            NewMemory(content="Works at Acme"),
            NewMemory(content="Has a trial until Friday", expires_at=now + dt.timedelta(days=1)),
        ],
        user_id="u1",
    ).ids
    replacement = publishing.add([NewMemory(content="Works at Globex")], user_id="u1").ids[0]
    publishing.admin.db.run(lambda conn: _supersede(conn, "u1", old, replacement))
    publishing.cells.parts[""].publish_changes("u1")
    publishing.admin.purge(now=now + dt.timedelta(days=2), superseded_days=0)
    kinds = [(e["detail-type"], e["detail"].get("memory_id")) for e in received(bus)]
    assert ("memory.superseded", str(old)) in kinds
    assert ("memory.expired", str(new)) in kinds
    assert ("memory.purged", str(old)) in kinds


def _supersede(conn: Any, user_id: str, old: Any, new: Any) -> None:
    from rushmem.store.engine.transactions import user_transaction
    from rushmem.store.memories.writes import supersede_memories

    with user_transaction(conn, user_id):
        supersede_memories(conn, user_id, [(old, new)])


def test_a_failed_publish_fails_no_write_and_loses_no_event(settings: Settings, bus: Any, database_url: str) -> None:
    calls: list[int] = []

    def refusing(entries: Sequence[tuple[str, str]]) -> list[str | None]:
        calls.append(len(entries))
        raise ConnectionError("the bus is unreachable")

    service = Memory(settings.model_copy(update={"event_bus": BUS}), publisher=refusing)
    try:
        stored = service.add([NewMemory(content="Prefers green tea")], user_id="u1")
        assert stored.created == 1 and calls == [1]
        message = ConversationEnded.model_validate(
            {"user_id": "u2", "messages": [{"role": "user", "content": "I prefer TypeScript."}]}
        )
        assert service.ingest_conversation(message).created == 1
        pending = _outbox(database_url)
        assert [(u, e) for u, e, _ in pending] == [("u1", "memory.created"), ("u2", "memory.created")]
        assert all(attempts == 1 for _, _, attempts in pending)
        status = service.admin.events_status()
        assert status.pending == 2 and status.failing == 2 and "unreachable" in (status.last_error or "")
    finally:
        service.close()
    # Waiting out the backoff: the scheduled drain (everyone's events) publishes them.
    with psycopg.connect(database_url) as owner:
        owner.execute("UPDATE change_outbox SET next_attempt_at = now() - interval '1 second'")
    drainer = Memory(settings.model_copy(update={"event_bus": BUS}))
    try:
        result = drainer.admin.drain_events()
        assert (result.published, result.failed) == (2, 0)
    finally:
        drainer.close()
    assert sorted(e["detail"]["user_id"] for e in received(bus)) == ["u1", "u2"]
    assert _outbox(database_url) == []


def test_entries_the_bus_refuses_stay_and_the_others_go(settings: Settings, bus: Any, database_url: str) -> None:
    def half(entries: Sequence[tuple[str, str]]) -> list[str | None]:
        return [None if i % 2 == 0 else "ThrottlingException: slow down" for i in range(len(entries))]

    service = Memory(settings.model_copy(update={"event_bus": BUS}), publisher=half)
    try:
        service.add([NewMemory(content=f"Fact {i}") for i in range(4)], user_id="u1")
        assert len(_outbox(database_url)) == 2
    finally:
        service.close()


def test_content_only_when_configured(settings: Settings, bus: Any) -> None:
    service = Memory(settings.model_copy(update={"event_bus": BUS, "event_content": True}))
    try:
        service.add([NewMemory(content="Prefers green tea")], user_id="u1")
    finally:
        service.close()
    (event,) = received(bus)
    assert event["detail"]["content"] == "Prefers green tea"


def test_without_a_bus_nothing_is_written_to_the_outbox(service: Memory, database_url: str) -> None:
    service.add([NewMemory(content="Prefers green tea")], user_id="u1")
    service.forget_user("u1")
    assert _outbox(database_url) == []


def test_a_users_transaction_sees_only_their_own_pending_events(settings: Settings, database_url: str) -> None:
    def refusing(entries: Sequence[tuple[str, str]]) -> list[str | None]:
        return ["down"] * len(entries)

    service = Memory(settings.model_copy(update={"event_bus": BUS}), publisher=refusing)
    try:
        service.add([NewMemory(content="Alice likes tea")], user_id="alice")
        service.add([NewMemory(content="Bob likes coffee")], user_id="bob")
        assert service.admin.events_status(user_id="alice").pending == 1
        conn = service.admin.db.connection()
        from rushmem.store.engine.transactions import user_transaction

        with user_transaction(conn, "alice"):
            seen = conn.execute("SELECT user_id FROM change_outbox").fetchall()
        assert seen == [("alice",)]
        # No user named and no drain declared: nothing.
        with conn.transaction():
            assert conn.execute("SELECT count(*) FROM change_outbox").fetchone() == (0,)
    finally:
        service.close()


def test_the_events_function_drains_on_schedule(lambda_env: str, bus: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from rushmem_tools.local import runtime
    from tests.support.recall import TEMPLATE

    monkeypatch.setenv("AGENT_MEMORY_EVENT_BUS", BUS)
    with psycopg.connect(lambda_env, autocommit=True) as owner:
        owner.execute(
            "INSERT INTO change_outbox (user_id, event, memory_id, category) "
            "VALUES ('u9', 'memory.created', gen_random_uuid(), 'fact')"
        )
    event = runtime.read_event(TEMPLATE.parent / "events" / "events-drain-scheduled.json")
    result = runtime.invoke(TEMPLATE, "EventsFunction", event)
    assert result["published"] == 1 and result["pending"] == 0 and result["bus"] == BUS
    assert [e["detail"]["user_id"] for e in received(bus)] == ["u9"]
