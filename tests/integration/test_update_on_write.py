"""Update on write against the real embedded PostgreSQL, under row-level security: an LLM
extractor (a local OpenAI-compatible server, or Bedrock Converse through botocore's Stubber)
is shown the user's related memories and restates or replaces them; the guards refuse what
it must not do; supersessions are written with the message, all or nothing."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import boto3
import numpy as np
import psycopg
import pytest
from botocore.stub import Stubber

from rushmem.config import Settings
from rushmem.embeddings.hashing import HashEmbedder
from rushmem.extraction import create_extractor
from rushmem.extraction.bedrock import BedrockConverseExtractor
from rushmem.extraction.prompt import build_prompt
from rushmem.providers.lifecycle import DEFAULT_EXTRACTION_MODEL as DEFAULT_MODEL
from rushmem.records import ExistingMemory
from rushmem.service import Memory
from rushmem_contract.models import ConversationEnded, IngestOutcome, NewMemory
from rushmem_tools.cli import main
from rushmem_tools.local import runtime as lambda_local
from tests.support.db import rows
from tests.support.ingest import (
    APP,
    TEMPLATE,
    ChatServer,
    MeetingEmbedder,
    Reply,
    failures,
    in_lockstep,
    memories_answer,
    sqs_event,
    sqs_record,
)

USER = "u-42"
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
JS: dict[str, Any] = {"content": "The user prefers JavaScript.", "category": "preference", "is_evergreen": True}
TS: dict[str, Any] = {
    "content": "The user prefers TypeScript over JavaScript.",
    "category": "preference",
    "is_evergreen": True,
}
CHANGE = "I used to prefer JavaScript, but now I prefer TypeScript."
LISTED = "most related to this conversation (JSON):\n"


def said(conversation_id: str, ended_at: str, *turns: str, **fields: Any) -> dict[str, Any]:
    """A "conversation ended" body: the user's turns, each answered by the assistant."""
    messages: list[dict[str, str]] = []
    for turn in turns:
        messages += [{"role": "user", "content": turn}, {"role": "assistant", "content": "Noted!"}]
    return {"user_id": USER, "conversation_id": conversation_id, "ended_at": ended_at, "messages": messages} | fields


def first_talk() -> dict[str, Any]:
    return said("c-1", "2026-11-01T09:00:00Z", "I prefer JavaScript.")


def change_talk(**fields: Any) -> dict[str, Any]:
    return said("c-2", "2026-11-29T10:15:00Z", CHANGE, **fields)


def shown_in(request: Any) -> dict[str, str]:
    """content -> handle of the existing memories a chat request lists (empty: none listed)."""
    user = request["messages"][1]["content"]
    if LISTED not in user:
        return {}
    listed, _ = json.JSONDecoder().raw_decode(user, user.index(LISTED) + len(LISTED))
    return {m["content"]: m["id"] for m in listed}


def answer(*items: dict[str, Any]) -> Callable[[Any], dict[str, Any]]:
    """A model stand-in that reads the prompt: in ``items``, "restates"/"replaces" name existing
    memories by content and are answered with the handles the prompt gave them (anything not
    listed is passed on as written, as a model inventing a reference would)."""

    def reply(request: Any) -> dict[str, Any]:
        handles = shown_in(request)
        out = []
        for item in items:
            item = dict(item)
            if "restates" in item:
                item["restates"] = handles.get(item["restates"], item["restates"])
            if "replaces" in item:
                item["replaces"] = [handles.get(c, c) for c in item["replaces"]]
            out.append(item)
        return memories_answer(*out)

    return reply


def llm_settings(server: ChatServer, **overrides: Any) -> dict[str, Any]:
    return {
        "llm_provider": "openai",
        "llm_base_url": server.base_url,
        "llm_api_key": "sk-test",
        "llm_model": "glm-4-flash",
        "http_timeout_s": 5,
        "max_retries": 0,
        **overrides,
    }


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch, database_url: str, server: ChatServer) -> ChatServer:
    """The handler, as in Lambda, configured for the openai provider against the local server."""
    env = {"database_url": database_url, "embedding_provider": "hash", "db_role": APP, **llm_settings(server)}
    for key, value in env.items():
        monkeypatch.setenv(f"AGENT_MEMORY_{key.upper()}", str(value))
    return server


@pytest.fixture
def llm_service(settings: Settings, server: ChatServer) -> Iterator[Memory]:
    """The service (as agent_memory_app) with the openai extractor against the local server."""
    service = Memory(
        settings.model_copy(update=llm_settings(server)),
        extractor=create_extractor(Settings(**llm_settings(server))),
    )
    yield service
    service.close()


def ingest(*bodies: dict[str, Any]) -> list[str]:
    """Through IngestFunction (the path of `rushmem invoke`); the failed messageIds."""
    return failures(lambda_local.invoke(TEMPLATE, "IngestFunction", sqs_event(*(sqs_record(b) for b in bodies))))


def deliver(service: Memory, body: dict[str, Any]) -> IngestOutcome:
    return service.ingest_conversation(ConversationEnded.model_validate(body))


def _new(content: str) -> NewMemory:
    return NewMemory(content=content, category="preference")


def active(service: Memory, user: str = USER) -> set[str]:
    return {m.content for m in service.list(user_id=user).memories}


def everything(service: Memory, user: str = USER) -> dict[str, Any]:
    return {m.content: m for m in service.list(user_id=user, include_inactive=True).memories}


# ---- the "done when" ------------------------------------------------------------------


def test_a_conversation_that_changes_a_preference_ends_with_one_active_memory_and_the_old_in_its_history(
    llm_env: ChatServer, service: Memory, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    llm_env.script(Reply(body=answer(JS)), Reply(body=answer({**TS, "replaces": [JS["content"]]})))
    assert ingest(first_talk()) == []
    assert ingest(change_talk()) == []

    first, second = (r.json["messages"] for r in llm_env.requests)
    assert '"replaces"' not in first[0]["content"] and LISTED not in first[1]["content"]  # nothing stored yet
    assert '"replaces"' in second[0]["content"]
    assert shown_in(llm_env.requests[1].json) == {JS["content"]: "m1"}
    assert not UUID_RE.search(second[0]["content"] + second[1]["content"])  # handles, never ids

    (now,) = service.list(user_id=USER).memories
    assert now.content == TS["content"] and now.source == "c-2"
    old = everything(service)[JS["content"]]
    assert old.superseded_by == now.id and old.superseded_at is not None
    recalled = service.recall("Which programming language does the user prefer?", user_id=USER)
    assert [m.content for m in recalled.memories] == [TS["content"]]
    debug = service.recall("Which programming language does the user prefer?", user_id=USER, include_inactive=True)
    assert {m.content for m in debug.memories} == {TS["content"], JS["content"]}

    events = service.history(old.id, user_id=USER).events
    assert [(e.event, e.source, e.related_id) for e in events] == [
        ("created", "c-1", None),
        ("superseded", "c-2", now.id),
    ]
    assert main(["history", "--user", USER, "--id", str(old.id)], settings=settings) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["event"], e["source"], e["related_id"]) for e in printed] == [
        ("created", "c-1", None),
        ("superseded", "c-2", str(now.id)),
    ]


@pytest.mark.model
def test_the_same_with_the_real_embedding_model(
    monkeypatch: pytest.MonkeyPatch, blank_database_url: str, server: ChatServer
) -> None:
    # all-MiniLM-L6-v2 (what `make demo` and a laptop use): its similarities pass the default guard.
    for key, value in {"database_url": blank_database_url, "db_role": APP, **llm_settings(server)}.items():
        monkeypatch.setenv(f"AGENT_MEMORY_{key.upper()}", str(value))
    restated = {"content": "The user still likes TypeScript best.", "category": "preference", "restates": TS["content"]}
    server.script(
        Reply(body=answer(JS)),
        Reply(body=answer({**TS, "replaces": [JS["content"]]})),
        Reply(body=answer(restated)),
    )
    assert ingest(first_talk()) == []
    assert ingest(change_talk()) == []
    assert ingest(said("c-3", "2026-11-30T10:00:00Z", "TypeScript is still my favourite.")) == []
    service = Memory(Settings(database_url=blank_database_url, db_role=APP))
    try:
        (now,) = service.list(user_id=USER).memories
        assert now.content == TS["content"]
        old = everything(service)[JS["content"]]
        assert [(e.event, e.source, e.related_id) for e in service.history(old.id, user_id=USER).events] == [
            ("created", "c-1", None),
            ("superseded", "c-2", now.id),
        ]
        events = service.history(now.id, user_id=USER).events
        assert [(e.event, e.source) for e in events] == [("created", "c-2"), ("refreshed", "c-3")]
    finally:
        service.close()


# ---- restating ---------------------------------------------------------------------------------


def test_a_restatement_refreshes_the_memory_instead_of_adding_one(llm_service: Memory, server: ChatServer) -> None:
    still = {"content": "The user still prefers JavaScript.", "category": "preference", "restates": JS["content"]}
    server.script(Reply(body=answer(JS)), Reply(body=answer(still)))
    first = deliver(llm_service, first_talk())
    again = deliver(llm_service, said("c-2", "2026-11-20T08:00:00Z", "JavaScript is still my favourite."))
    assert (again.created, again.refreshed, again.superseded, again.ids) == (0, 1, 0, first.ids)
    (memory,) = llm_service.list(user_id=USER, include_inactive=True).memories
    assert memory.content == JS["content"] and memory.updated_at == dt.datetime(2026, 11, 20, 8, tzinfo=dt.UTC)
    assert memory.metadata == {"extracted_by": "openai:glm-4-flash"}
    assert [(e.event, e.source) for e in llm_service.history(memory.id, user_id=USER).events] == [
        ("created", "c-1"),
        ("refreshed", "c-2"),
    ]


def test_changing_back_revives_the_old_memory_and_supersedes_the_new_one(
    llm_service: Memory, server: ChatServer
) -> None:
    server.script(
        Reply(body=answer(JS)),
        Reply(body=answer({**TS, "replaces": [JS["content"]]})),
        Reply(body=answer({**JS, "replaces": [TS["content"]]})),
    )
    (js_id,) = deliver(llm_service, first_talk()).ids
    (ts_id,) = deliver(llm_service, change_talk()).ids
    back = deliver(
        llm_service, said("c-3", "2026-12-01T09:00:00Z", "I'm back to JavaScript; TypeScript was not for me.")
    )
    assert (back.ids, back.created, back.superseded) == ([js_id], 0, 1)
    assert active(llm_service) == {JS["content"]}
    assert [(e.event, e.source) for e in llm_service.history(js_id, user_id=USER).events] == [
        ("created", "c-1"),
        ("superseded", "c-2"),
        ("revived", "c-3"),
    ]
    assert [(e.event, e.related_id) for e in llm_service.history(ts_id, user_id=USER).events] == [
        ("created", None),
        ("superseded", js_id),
    ]


# ---- the guards ----------------------------------------------------------------------------------


def test_an_invented_reference_is_ignored_and_the_fact_kept_as_new(
    llm_service: Memory, server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(Reply(body=answer(JS)))
    (js_id,) = deliver(llm_service, first_talk()).ids
    go = {"content": "The user prefers Go over JavaScript for scripts.", "category": "preference"}
    server.script(Reply(body=answer({**TS, "replaces": ["m7"]}, {**go, "replaces": [str(js_id)]})))
    outcome = deliver(llm_service, change_talk())
    assert (outcome.created, outcome.superseded, outcome.updates_ignored) == (2, 0, 2)
    assert active(llm_service) == {JS["content"], TS["content"], go["content"]}
    assert caplog.text.count("names no memory that was shown") == 2 and "'m7'" in caplog.text
    assert [e.event for e in llm_service.history(js_id, user_id=USER).events] == ["created"]


def test_an_unrelated_replacement_or_restatement_is_refused(
    llm_service: Memory, server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(Reply(body=answer(JS)))
    (js_id,) = deliver(llm_service, first_talk()).ids
    dog = {"content": "The user has a dog named Rex.", "category": "fact", "replaces": [JS["content"]]}
    hiking = {"content": "The user likes hiking in the mountains.", "restates": JS["content"]}
    server.script(Reply(body=answer(dog, hiking)))
    outcome = deliver(llm_service, said("c-2", "2026-11-29T10:15:00Z", "My dog Rex and I love mountain hikes."))
    assert (outcome.created, outcome.refreshed, outcome.superseded, outcome.updates_ignored) == (2, 0, 0, 2)
    assert active(llm_service) == {JS["content"], dog["content"], hiking["content"]}
    assert caplog.text.count("is about something else (similarity") == 2
    assert [e.event for e in llm_service.history(js_id, user_id=USER).events] == ["created"]


def test_the_guard_threshold_is_a_setting(settings: Settings, server: ChatServer) -> None:
    strict = Memory(
        settings.model_copy(update={**llm_settings(server), "supersede_min_similarity": 0.99}),
        extractor=create_extractor(Settings(**llm_settings(server))),
    )
    try:
        server.script(Reply(body=answer(JS)), Reply(body=answer({**TS, "replaces": [JS["content"]]})))
        deliver(strict, first_talk())
        assert (deliver(strict, change_talk()).superseded, active(strict)) == (0, {JS["content"], TS["content"]})
    finally:
        strict.close()


def test_a_memory_is_replaced_once_even_if_the_model_replaces_it_twice(
    llm_service: Memory, server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(Reply(body=answer(JS)))
    (js_id,) = deliver(llm_service, first_talk()).ids
    also = {"content": "The user prefers TypeScript over JavaScript for new projects.", "category": "preference"}
    server.script(Reply(body=answer({**TS, "replaces": [JS["content"]]}, {**also, "replaces": [JS["content"]]})))
    outcome = deliver(llm_service, change_talk())
    assert (outcome.created, outcome.superseded, outcome.updates_ignored) == (2, 1, 1)
    assert "already restates or replaces" in caplog.text
    ts_id = outcome.ids[0]
    assert [(e.event, e.related_id) for e in llm_service.history(js_id, user_id=USER).events] == [
        ("created", None),
        ("superseded", ts_id),
    ]


def test_the_rules_provider_is_never_shown_memories_and_the_write_path_reads_its_correction(
    settings: Settings,
) -> None:
    """The rules provider judges nothing itself; the write path's same-slot rule does: "now" marks
    "I prefer TypeScript" as a change of "prefers JavaScript" (issue 42; both were kept before)."""

    class CountingEmbedder(HashEmbedder):
        calls: list[list[str]] = []  # noqa: RUF012 - per test, one instance

        def embed(self, texts: Sequence[str]) -> Any:
            self.calls.append(list(texts))
            return super().embed(texts)

    embedder = CountingEmbedder()
    service = Memory(settings, embedder=embedder)  # the default provider: rules
    try:
        deliver(service, first_talk())
        outcome = deliver(service, said("c-2", "2026-11-29T10:15:00Z", "I prefer TypeScript now."))
        assert (outcome.created, outcome.superseded, outcome.updates_ignored) == (1, 1, 0)
        assert len(active(service)) == 1
        assert all("I prefer TypeScript now." not in texts for texts in embedder.calls)  # no related-memories query
    finally:
        service.close()


def test_showing_memories_can_be_turned_off(settings: Settings, server: ChatServer) -> None:
    off = llm_settings(server, related_memories_shown=0)
    service = Memory(settings.model_copy(update=off), extractor=create_extractor(Settings(**off)))
    try:
        server.script(Reply(body=answer(JS)), Reply(body=answer({**TS, "replaces": ["m1"]})))
        deliver(service, first_talk())
        outcome = deliver(service, change_talk())
        assert LISTED not in server.requests[1].json["messages"][1]["content"]
        assert (outcome.superseded, outcome.updates_ignored) == (0, 1)
    finally:
        service.close()


# ---- scope ---------------------------------------------------------------------------------------


def test_only_memories_the_conversation_can_see_are_shown_and_replacing_a_user_wide_one_is_user_wide(
    llm_service: Memory, server: ChatServer
) -> None:
    llm_service.add([_new(JS["content"])], user_id=USER)  # user-wide
    llm_service.add([_new("The user's web app uses JavaScript modules.")], user_id=USER, project_id="web")
    llm_service.add([_new("The user prefers JavaScript for build scripts.")], user_id=USER, project_id="tools")
    llm_service.add([_new("The user prefers JavaScript too.")], user_id="someone-else")
    server.script(Reply(body=answer({**TS, "replaces": [JS["content"]]})))
    outcome = deliver(llm_service, change_talk(project_id="web"))
    assert set(shown_in(server.requests[0].json)) == {JS["content"], "The user's web app uses JavaScript modules."}
    (ts,) = [m for m in llm_service.list(user_id=USER).memories if m.content == TS["content"]]
    assert outcome.superseded == 1 and ts.project_id is None  # it took the scope of what it replaced
    assert TS["content"] in {
        m.content for m in llm_service.recall("language", user_id=USER, project_id="tools").memories
    }
    assert JS["content"] not in active(llm_service)
    assert active(llm_service, "someone-else") == {"The user prefers JavaScript too."}


# ---- expiry from extraction ------------------------------------------------------------------


def test_time_bound_facts_expire_and_invalid_expiries_are_dropped(
    llm_service: Memory, server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    vacation = {"content": "The user is on vacation until 2026-12-04.", "category": "fact", "expires_at": "2026-12-04"}
    past = {**TS, "expires_at": "2026-11-01"}
    far = {"content": "The user lives in Lisbon.", "category": "identity", "expires_at": "2040-01-01"}
    garbage = {"content": "The user's team ships on Fridays.", "category": "decision", "expires_at": "soonish"}
    server.script(Reply(body=answer(vacation, past, far, garbage)))
    deliver(llm_service, said("c-1", "2026-11-29T10:15:00Z", "I'm on vacation until Friday.", "I live in Lisbon."))
    stored = everything(llm_service)
    assert stored[vacation["content"]].expires_at == dt.datetime(2026, 12, 5, tzinfo=dt.UTC)
    assert [stored[f["content"]].expires_at for f in (past, far, garbage)] == [None, None, None]
    assert caplog.text.count("dropped") == 2 and "soonish" in caplog.text
    query = "Is the user on vacation?"
    during = llm_service.recall(query, user_id=USER, now=dt.datetime(2026, 12, 4, 20, tzinfo=dt.UTC))
    after = llm_service.recall(query, user_id=USER, now=dt.datetime(2026, 12, 5, 1, tzinfo=dt.UTC))
    assert vacation["content"] in {m.content for m in during.memories}
    assert vacation["content"] not in {m.content for m in after.memories}


# ---- delivery: redelivery, concurrency, all or nothing --------------------------------------


def snapshot(database_url: str) -> list[tuple[Any, ...]]:
    return (
        rows(database_url, "SELECT * FROM user_memories ORDER BY id")
        + rows(database_url, "SELECT * FROM memory_events ORDER BY id")
        + rows(database_url, "SELECT * FROM ingested_messages ORDER BY user_id, message_hash")
    )


def test_a_redelivered_superseding_message_changes_nothing(llm_env: ChatServer, database_url: str) -> None:
    llm_env.script(Reply(body=answer(JS)), Reply(body=answer({**TS, "replaces": [JS["content"]]})))
    assert ingest(first_talk()) == []
    assert ingest(change_talk()) == []
    before = snapshot(database_url)
    llm_env.default = Reply(body=answer({"content": "The user prefers Rust.", "replaces": [TS["content"]]}))
    assert ingest(change_talk()) == []  # SQS delivered it again
    assert snapshot(database_url) == before and len(llm_env.requests) == 2


def at_once(database_url: str, server: ChatServer, bodies: list[dict[str, Any]]) -> list[IngestOutcome]:
    """Each body delivered by its own service and connection (two containers), at the same time."""
    outcomes: list[IngestOutcome | None] = [None] * len(bodies)

    def work(i: int, barrier: threading.Barrier) -> None:
        settings = Settings(database_url=database_url, embedding_provider="hash", db_role=APP, **llm_settings(server))
        service = Memory(settings, embedder=MeetingEmbedder(barrier))
        try:
            outcomes[i] = deliver(service, bodies[i])
        finally:
            service.close()

    in_lockstep(len(bodies), work)
    return [o for o in outcomes if o is not None]


def supersessions(database_url: str) -> list[tuple[Any, ...]]:
    return rows(database_url, "SELECT memory_id, related_id, source FROM memory_events WHERE event = 'superseded'")


def test_the_same_superseding_message_delivered_twice_at_once_supersedes_once(
    llm_service: Memory, server: ChatServer, database_url: str
) -> None:
    server.script(Reply(body=answer(JS)))
    (js_id,) = deliver(llm_service, first_talk()).ids
    server.default = Reply(body=answer({**TS, "replaces": [JS["content"]]}))
    outcomes = at_once(database_url, server, [change_talk(), change_talk()])
    assert sorted(o.status for o in outcomes) == ["duplicate", "stored"]
    ((old, new, source),) = supersessions(database_url)
    assert (old, source) == (js_id, "c-2")
    assert active(llm_service) == {TS["content"]} and llm_service.list(user_id=USER).memories[0].id == new


def test_two_conversations_replacing_the_same_memory_at_once_supersede_it_once(
    llm_service: Memory, server: ChatServer, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(Reply(body=answer(JS)))
    deliver(llm_service, first_talk())
    rust = {"content": "The user prefers Rust over JavaScript.", "category": "preference"}
    server.script(
        Reply(body=answer({**TS, "replaces": [JS["content"]]})),
        Reply(body=answer({**rust, "replaces": [JS["content"]]})),
    )
    outcomes = at_once(database_url, server, [change_talk(), said("c-3", "2026-11-29T11:00:00Z", "Rust, actually.")])
    assert len(supersessions(database_url)) == 1
    assert sorted((o.superseded, o.updates_ignored) for o in outcomes) == [(0, 1), (1, 0)]
    assert active(llm_service) == {TS["content"], rust["content"]}  # the later fact kept as new
    assert "ended or left the scope before the write" in caplog.text


def test_a_target_forgotten_while_the_model_thinks_is_not_superseded(
    llm_service: Memory, server: ChatServer, database_url: str
) -> None:
    server.script(Reply(body=answer(JS)))
    (js_id,) = deliver(llm_service, first_talk()).ids
    replace = answer({**TS, "replaces": [JS["content"]]})

    def forget_then_answer(request: Any) -> dict[str, Any]:
        with psycopg.connect(database_url, autocommit=True) as conn:  # another process deletes it meanwhile
            conn.execute("DELETE FROM user_memories WHERE id = %s", [js_id])
        return replace(request)

    server.script(Reply(body=forget_then_answer))
    outcome = deliver(llm_service, change_talk())
    assert (outcome.created, outcome.superseded, outcome.updates_ignored) == (1, 0, 1)
    assert active(llm_service) == {TS["content"]}


def test_a_failed_write_supersedes_nothing_and_the_retry_does(
    llm_service: Memory, server: ChatServer, database_url: str
) -> None:
    server.script(Reply(body=answer(JS)))
    (js_id,) = deliver(llm_service, first_talk()).ids
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION fail_receipt() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'disk full (simulated)'; END $$"
        )
        conn.execute("CREATE TRIGGER fail_receipt BEFORE INSERT ON ingested_messages EXECUTE FUNCTION fail_receipt()")
    server.default = Reply(body=answer({**TS, "replaces": [JS["content"]]}))
    with pytest.raises(psycopg.Error):
        deliver(llm_service, change_talk())
    assert active(llm_service) == {JS["content"]} and supersessions(database_url) == []
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER fail_receipt ON ingested_messages")
    assert deliver(llm_service, change_talk()).superseded == 1
    assert [old for old, _, _ in supersessions(database_url)] == [js_id]


# ---- Bedrock Converse ------------------------------------------------------------------------


@pytest.fixture
def bedrock_client(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return boto3.client("bedrock-runtime", region_name="us-east-1")


def converse(text: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 500, "outputTokens": 60, "totalTokens": 560},
        "metrics": {"latencyMs": 700},
    }


def test_bedrock_converse_replaces_a_preference(settings: Settings, bedrock_client: Any) -> None:
    service = Memory(settings, extractor=BedrockConverseExtractor(bedrock_client))
    change = ConversationEnded.model_validate(change_talk())
    listed = [ExistingMemory("m1", None, JS["content"], "preference", None, np.zeros(1))]  # type: ignore[arg-type]
    system, user = build_prompt(change.messages, max_items=20, ended_at=change.ended_at, existing=listed)
    stubber = Stubber(bedrock_client)
    stubber.add_response("converse", converse(json.dumps({"memories": [JS]})))
    stubber.add_response(
        "converse",
        converse("```json\n" + json.dumps([{**TS, "replaces": "m1"}]) + "\n```"),
        expected_params={
            "modelId": DEFAULT_MODEL,
            "system": [{"text": system}],
            "messages": [{"role": "user", "content": [{"text": user}]}],
            "inferenceConfig": {"maxTokens": 1024, "temperature": 0.0},
        },
    )
    try:
        with stubber:
            (js_id,) = deliver(service, first_talk()).ids
            outcome = service.ingest_conversation(change)
        stubber.assert_no_pending_responses()
        assert (outcome.created, outcome.superseded) == (1, 1)
        assert active(service) == {TS["content"]}
        assert [(e.event, e.source, e.related_id) for e in service.history(js_id, user_id=USER).events] == [
            ("created", "c-1", None),
            ("superseded", "c-2", outcome.ids[0]),
        ]
    finally:
        service.close()


def test_bedrock_invented_and_unrelated_references_are_refused(settings: Settings, bedrock_client: Any) -> None:
    service = Memory(settings, extractor=BedrockConverseExtractor(bedrock_client))
    dog = {"content": "The user has a dog named Rex.", "category": "fact", "replaces": ["m1"]}
    stubber = Stubber(bedrock_client)
    stubber.add_response("converse", converse(json.dumps({"memories": [JS]})))
    stubber.add_response("converse", converse(json.dumps({"memories": [{**TS, "replaces": ["m2"]}, dog]})))
    try:
        with stubber:
            deliver(service, first_talk())
            outcome = deliver(service, change_talk())
        assert (outcome.created, outcome.superseded, outcome.updates_ignored) == (2, 0, 2)
        assert active(service) == {JS["content"], TS["content"], dog["content"]}
    finally:
        service.close()


# ---- choosing the threshold -------------------------------------------------------------------


def test_the_similarity_command_shows_how_the_guard_sees_a_pair(
    capsys: pytest.CaptureFixture[str], settings: Settings
) -> None:
    assert main(["similarity", TS["content"], JS["content"], "The user has a dog named Rex."], settings=settings) == 0
    close, far = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert close["text"] == JS["content"] and close["may_update"] is True
    assert far["may_update"] is False and far["similarity"] < close["similarity"]


# Labelled with all-MiniLM-L6-v2 in mind: replacements a model would rightly make, and pairs on
# different subjects that a confused model might link. Known limit, not listed: short sentences
# of the same shape ("The user uses Vim." / "The user uses pnpm." = 0.52) pass the guard.
REPLACEMENTS = [
    ("The user prefers TypeScript over JavaScript.", "The user prefers JavaScript."),
    ("The user now prefers TypeScript.", "The user prefers JavaScript for frontend work."),
    ("The user now lives in Berlin.", "The user lives in Lisbon."),
    ("The user moved to Berlin.", "The user lives in Lisbon."),
    ("The user switched from Vim to VS Code.", "The user uses Vim keybindings everywhere."),
    ("The user no longer has a dog.", "The user has a golden retriever named Biscuit."),
    ("The user works at Google now.", "The user works at Acme as a frontend developer."),
    ("The user's team deploys with GitHub Actions.", "The user's team deploys with Jenkins."),
    ("The user prefers light mode.", "The user prefers dark mode."),
    ("The user's project uses PostgreSQL instead of MySQL.", "The user's project uses MySQL."),
    ("The user stopped training for the half marathon.", "The user is training for a half marathon."),
    ("The user now prefers tabs for indentation.", "The user prefers spaces."),
    ("The user's stack is now Vue.", "The user's stack is TypeScript, with React for the UI."),
    ("The user is now a team lead.", "The user is a frontend developer."),
    ("The user's new favourite food is sushi.", "The user's favourite food is ramen."),
    ("The user is no longer on vacation.", "The user is on vacation until Friday."),
    ("The user decided to use pnpm instead of npm.", "The user uses npm."),
]
UNRELATED = [
    ("The user has a dog named Rex.", "The user prefers JavaScript."),
    ("The user's dog is called Rex.", "The user prefers TypeScript over JavaScript."),
    ("The user is on vacation until Friday.", "The user prefers TypeScript."),
    ("The user lives in Berlin.", "The user prefers dark mode."),
    ("The user's favourite food is ramen.", "The user works at Acme."),
    ("The user prefers TypeScript.", "Every SVG modification must be synced to the defaultSVG variable."),
    ("The user has a golden retriever named Biscuit.", "The user is building an SVG editor."),
    ("The user is training for a half marathon.", "The user's stack is TypeScript, with React for the UI."),
    ("The user prefers Python for every editor plugin.", "The user lives in Lisbon."),
    ("The user speaks Portuguese.", "The user uses pnpm."),
    ("The user prefers dark mode.", "The user has two children."),
    ("The user prefers dark mode.", "The user prefers TypeScript."),
    ("The user prefers tabs.", "The user prefers TypeScript."),
    ("The user lives in Berlin.", "The user works at Acme."),
    ("The user prefers coffee.", "The user prefers TypeScript over JavaScript."),
    ("The user is allergic to peanuts.", "The user prefers TypeScript."),
    ("The user prefers short answers.", "The user prefers TypeScript."),
    ("The user now prefers TypeScript over JavaScript.", "The user lives in Lisbon."),
    ("The user is on vacation until 2026-12-04.", "The user works remotely."),
]


@pytest.mark.model
def test_the_default_threshold_separates_replacements_from_unrelated_pairs(local_embedder: Any) -> None:
    threshold = Settings().supersede_min_similarity

    def similarity(pairs: list[tuple[str, str]]) -> np.ndarray:
        a = local_embedder.embed([p[0] for p in pairs])
        b = local_embedder.embed([p[1] for p in pairs])
        return np.asarray((a * b).sum(axis=1))

    kept = similarity(REPLACEMENTS)
    refused = similarity(UNRELATED)
    assert [p for p, s in zip(REPLACEMENTS, kept, strict=True) if s < threshold] == []
    assert [p for p, s in zip(UNRELATED, refused, strict=True) if s >= threshold] == []


# ---- the sample event ------------------------------------------------------------------------

SAMPLE = TEMPLATE.parent / "events" / "conversation-changes-preference.json"


def test_the_sample_event_with_an_llm_supersedes_the_old_preference(llm_env: ChatServer, service: Memory) -> None:
    frontend = {"content": "The user prefers JavaScript for frontend work.", "category": "preference"}
    everywhere = {"content": "The user now prefers TypeScript for frontend work too.", "category": "preference"}
    vacation = {"content": "The user is on vacation until 2026-12-04.", "expires_at": "2026-12-04"}
    llm_env.script(
        Reply(body=answer(frontend)), Reply(body=answer({**everywhere, "replaces": [frontend["content"]]}, vacation))
    )
    assert failures(lambda_local.invoke(TEMPLATE, "IngestFunction", lambda_local.read_event(SAMPLE))) == []
    stored = {m.content: m for m in service.list(user_id="u-7", include_inactive=True).memories}
    assert stored[frontend["content"]].superseded_by == stored[everywhere["content"]].id
    assert stored[vacation["content"]].expires_at == dt.datetime(2026, 12, 5, tzinfo=dt.UTC)
    assert [e.event for e in service.history(stored[frontend["content"]].id, user_id="u-7").events] == [
        "created",
        "superseded",
    ]


def test_the_sample_event_with_the_rules_provider_keeps_both_statements(
    monkeypatch: pytest.MonkeyPatch, database_url: str, service: Memory
) -> None:
    for key, value in {"DATABASE_URL": database_url, "EMBEDDING_PROVIDER": "hash", "DB_ROLE": APP}.items():
        monkeypatch.setenv(f"AGENT_MEMORY_{key}", value)
    assert failures(lambda_local.invoke(TEMPLATE, "IngestFunction", lambda_local.read_event(SAMPLE))) == []
    assert active(service, "u-7") == {
        "The user prefers JavaScript for frontend work.",
        "The user now prefers TypeScript for everything.",
    }


def test_the_cli_can_give_a_memory_an_expiry(capsys: pytest.CaptureFixture[str], settings: Settings) -> None:
    # Relative to the run: the memory is created now, so "before" must lie between now and the expiry.
    expires = (dt.datetime.now(dt.UTC) + dt.timedelta(days=2)).replace(microsecond=0)
    args = ["add", "--user", USER, "--expires-at", expires.isoformat(), "The user is on vacation until Friday."]
    assert main(args, settings=settings) == 0
    capsys.readouterr()
    service = Memory(settings)
    try:
        (memory,) = service.list(user_id=USER, include_inactive=True).memories
        assert memory.expires_at == expires
        before = service.recall("vacation", user_id=USER, now=expires - dt.timedelta(days=1))
        assert len(before.memories) == 1
        assert service.recall("vacation", user_id=USER, now=expires + dt.timedelta(days=1)).memories == []
    finally:
        service.close()
