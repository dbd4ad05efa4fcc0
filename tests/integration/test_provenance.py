"""Provenance and tombstones (migration 0012) on the real embedded PostgreSQL, through every door:
each write answers with a write id that the memories it touched and the history events it caused
carry (export and import keep it); deleting one memory leaves a tombstone without its content."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client

from rushmem.config import Settings
from rushmem.ingest.importing import ImportReport
from rushmem.mcp.tools import Identity, MemoryTools, build_server, fixed_identity
from rushmem.service import Memory
from rushmem_client import AsyncMemoryClient, MemoryClient
from rushmem_contract.errors import NotFound
from rushmem_contract.models import ConversationEnded, MemoryChanges, NewMemory
from rushmem_tools.cli import main
from tests.support.recall import body_of, invoke, with_body, with_request

USER = "user-123"
SECRET = "The user's locker code is 4417"


def rows(database_url: str, query: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(query, params).fetchall()


def stored_write_ids(database_url: str, memory_id: uuid.UUID | str) -> tuple[Any, list[Any]]:
    """The row's write id and its events' write ids (oldest first), read past the service."""
    (row,) = rows(database_url, "SELECT write_id FROM user_memories WHERE id = %s", memory_id)
    events = rows(database_url, "SELECT write_id FROM memory_events WHERE memory_id = %s ORDER BY id", memory_id)
    return row[0], [e[0] for e in events]


def contents_left(database_url: str, memory_id: uuid.UUID | str, text: str) -> list[str]:
    """Every place the store still holds ``text`` for this memory: its history (content and
    details) and the change outbox."""
    found = rows(
        database_url,
        "SELECT 'history' FROM memory_events WHERE memory_id = %s AND (content LIKE %s OR detail::text LIKE %s) "
        "UNION ALL SELECT 'outbox' FROM change_outbox WHERE memory_id = %s AND content LIKE %s",
        memory_id, f"%{text}%", f"%{text}%", memory_id, f"%{text}%",
    )  # fmt: skip
    return [r[0] for r in found]


# ---- the service -------------------------------------------------------------------------------


@pytest.mark.both_backends
def test_each_write_has_its_own_id_on_the_memories_and_events_it_touched(service: Memory, database_url: str) -> None:
    first = service.add(["Prefers pnpm", "Lives in Lisbon"], user_id="u1", source="api")
    assert first.write_id is not None
    again = service.add(["prefers pnpm"], user_id="u1")  # the same fact: refreshed by a second write
    assert again.write_id not in (None, first.write_id) and again.ids == first.ids[:1]
    pnpm, lisbon = first.ids
    assert stored_write_ids(database_url, pnpm) == (again.write_id, [first.write_id, again.write_id])
    assert stored_write_ids(database_url, lisbon) == (first.write_id, [first.write_id])
    assert service.get(pnpm, user_id="u1").write_id == again.write_id
    assert [(e.event, e.write_id) for e in service.history(pnpm, user_id="u1").events] == [
        ("created", first.write_id), ("refreshed", again.write_id)
    ]  # fmt: skip
    edited = service.update(lisbon, MemoryChanges(content="Lives in Porto"), user_id="u1", source="api")
    assert edited.write_id not in (None, first.write_id)
    assert service.history(lisbon, user_id="u1").events[-1].write_id == edited.write_id


def test_an_ingested_conversation_names_its_write_and_its_conversation(service: Memory) -> None:
    outcome = service.ingest_conversation(
        ConversationEnded(user_id="u1", conversation_id="c-7", memories=[NewMemory(content="Deploys on Fridays")])
    )
    assert outcome.write_id is not None
    (event,) = service.history(outcome.ids[0], user_id="u1").events
    assert (event.write_id, event.source) == (outcome.write_id, "c-7")
    assert service.get(outcome.ids[0], user_id="u1").write_id == outcome.write_id
    # A redelivery writes nothing: no new write id, the memory keeps the first one.
    again = service.ingest_conversation(
        ConversationEnded(user_id="u1", conversation_id="c-7", memories=[NewMemory(content="Deploys on Fridays")])
    )
    assert again.status == "duplicate" and again.write_id is None


@pytest.mark.both_backends
def test_export_lines_carry_the_write_id_and_import_keeps_it(service: Memory) -> None:
    stored = service.add(["Prefers pnpm"], user_id="u1")
    (line,) = service.export(user_id="u1").lines
    assert line.write_id == stored.write_id
    service.forget_user("u1")
    restored = service.import_([line])
    assert restored.write_id not in (None, stored.write_id)
    memory = service.get(stored.ids[0], user_id="u1")
    assert memory.write_id == stored.write_id  # the exported memory's write, kept
    # Its new history starts with the import, under the import's write id.
    assert [(e.event, e.write_id) for e in service.history(memory.id, user_id="u1").events] == [
        ("created", restored.write_id)
    ]


def test_a_whole_jsonl_import_is_one_write(service: Memory) -> None:
    report = ImportReport()
    lines = [(n, json.dumps({"user_id": f"u{n % 2}", "content": f"Fact number {n}"})) for n in range(1, 6)]
    service.admin.import_jsonl(iter(lines), report)
    assert report.write_id is not None and report.created == 5
    memories = [*service.list(user_id="u0").memories, *service.list(user_id="u1").memories]
    assert {m.write_id for m in memories} == {report.write_id}


@pytest.mark.both_backends
def test_deleting_a_memory_removes_its_content_from_history_and_keeps_a_tombstone(
    service: Memory, database_url: str
) -> None:
    memory_id = service.add([NewMemory(content="The user's locker code is 1234", metadata={"pin": "1234"})],
                            user_id="u1", source="api").ids[0]  # fmt: skip
    service.add(["the user's locker code is 1234"], user_id="u1")  # a refreshed event
    service.update(memory_id, MemoryChanges(content=SECRET, metadata={"room": "B"}), user_id="u1")
    kept = service.add(["Prefers pnpm"], user_id="u1").ids[0]
    assert contents_left(database_url, memory_id, "1234")  # the history holds the old versions
    service.delete(memory_id, user_id="u1", source="support-desk")  # None; NotFound had it not been there
    with pytest.raises(NotFound):
        service.get(memory_id, user_id="u1")
    events = service.history(memory_id, user_id="u1").events
    assert [e.event for e in events] == ["created", "refreshed", "updated", "deleted"]
    assert all(e.content is None for e in events)
    assert events[2].detail == {"previous": {}}  # what the edit changed is gone with the text
    tombstone = events[-1]
    assert (tombstone.memory_id, tombstone.source, tombstone.content) == (memory_id, "support-desk", None)
    assert contents_left(database_url, memory_id, "1234") == contents_left(database_url, memory_id, "4417") == []
    assert "4417" not in json.dumps([e.model_dump(mode="json") for e in service.history(user_id="u1").events])
    # Other memories' history is untouched.
    assert [e.content for e in service.history(kept, user_id="u1").events] == ["Prefers pnpm"]


def test_a_deleted_memorys_text_leaves_the_change_outbox(settings: Settings, database_url: str) -> None:
    def refusing(entries: Any) -> list[str | None]:
        raise ConnectionError("the bus is unreachable")  # the events stay in the outbox

    failing = Memory(settings.model_copy(update={"event_bus": "bus", "event_content": True}), publisher=refusing)
    try:
        memory_id = failing.add([SECRET], user_id="u1").ids[0]
        assert contents_left(database_url, memory_id, "4417") == ["history", "outbox"]
        failing.delete(memory_id, user_id="u1")
        assert contents_left(database_url, memory_id, "4417") == []
        forgotten = rows(database_url, "SELECT content FROM change_outbox WHERE event = 'memory.forgotten'")
        assert forgotten == [(None,)]
    finally:
        failing.close()


# ---- the HTTP handler (events/), the clients against serve, MCP, the CLI ------------------------


def test_write_ids_and_tombstones_through_the_handler(lambda_env: str, database_url: str) -> None:
    added = invoke(with_body("http-memories-add.json", {"user_id": USER, "memories": [{"content": SECRET}]}))
    assert added["statusCode"] == 201
    body = body_of(added)
    (memory_id,) = body["ids"]
    write_id = body["write_id"]
    got = body_of(invoke(with_request("http-memory-get.json", "GET", f"/memories/{memory_id}", {"user_id": USER})))
    assert got["write_id"] == write_id
    patched = invoke(
        with_body(
            with_request("http-memory-update.json", "PATCH", f"/memories/{memory_id}", {"user_id": USER}),
            {"category": "identity"},
        )
    )
    assert body_of(patched)["write_id"] not in (None, write_id)
    history = with_request("http-memory-history.json", "GET", f"/memories/{memory_id}/history", {"user_id": USER})
    before = body_of(invoke(history))["events"]
    assert [e["write_id"] for e in before] == [write_id, body_of(patched)["write_id"]]
    assert SECRET in json.dumps(before)
    deleted = invoke(with_request("http-memories-delete.json", "DELETE", f"/memories/{memory_id}", {"user_id": USER}))
    assert deleted["statusCode"] in (200, 204)
    after = body_of(invoke(history))["events"]
    assert [e["event"] for e in after] == ["created", "updated", "deleted"]
    assert all(e.get("content") is None for e in after) and "4417" not in json.dumps(after)
    conversation = invoke(
        with_body(
            "http-conversation.json", {"user_id": USER, "conversation_id": "c-9", "memories": [{"content": "x y"}]}
        )
    )
    assert body_of(conversation)["write_id"]


def test_the_clients_read_write_ids_and_tombstones(served: str) -> None:
    client = MemoryClient(served)
    stored = client.add([SECRET], user_id="u1")
    assert stored.write_id is not None
    assert client.get(stored.ids[0], user_id="u1").write_id == stored.write_id
    (line,) = client.export(user_id="u1").lines
    assert line.write_id == stored.write_id
    outcome = client.ingest_conversation([{"role": "user", "content": "I always deploy on Fridays."}], user_id="u1")
    assert outcome.write_id is not None
    client.delete(stored.ids[0], user_id="u1")
    events = client.history(stored.ids[0], user_id="u1").events
    assert [e.event for e in events] == ["created", "deleted"] and all(e.content is None for e in events)

    async def scenario() -> None:
        async with AsyncMemoryClient(served) as aclient:
            added = await aclient.add(["Uses pnpm"], user_id="u2")
            assert (await aclient.get(added.ids[0], user_id="u2")).write_id == added.write_id

    asyncio.run(scenario())


def test_mcp_tools_return_write_ids_and_forget_leaves_a_tombstone(service: Memory) -> None:
    server = build_server(MemoryTools(lambda: service, fixed_identity(Identity("u1"))), "all")

    async def scenario() -> None:
        async with Client(server) as client:
            stored = (await client.call_tool("remember", {"memories": [SECRET]})).structured_content
            assert stored is not None and stored["write_id"]
            memory_id = stored["ids"][0]
            handed = await client.call_tool(
                "remember_conversation", {"messages": [{"role": "user", "content": "I always deploy on Fridays."}]}
            )
            assert handed.structured_content is not None and handed.structured_content["write_id"]
            await client.call_tool("forget_memory", {"memory_id": memory_id})
            events = service.history(uuid.UUID(memory_id), user_id="u1").events
            assert [e.event for e in events] == ["created", "deleted"] and all(e.content is None for e in events)
            assert events[0].write_id == uuid.UUID(stored["write_id"])

    asyncio.run(scenario())


def test_the_cli_prints_write_ids_and_forget_leaves_a_tombstone(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    def run(*argv: str) -> list[Any]:
        assert main(list(argv), settings=settings) == 0
        return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]

    (added,) = run("add", "--user", "u1", SECRET)
    assert added["write_id"]
    (memory,) = run("get", "--user", "u1", "--id", added["ids"][0])
    assert memory["write_id"] == added["write_id"]
    (edited,) = run("update", "--user", "u1", "--id", added["ids"][0], "--category", "identity")
    assert edited["write_id"] not in (None, added["write_id"])
    source = tmp_path / "lines.jsonl"
    source.write_text(json.dumps({"user_id": "u2", "content": "Uses pnpm"}) + "\n", encoding="utf-8")
    (report,) = run("import", str(source))
    assert report["write_id"]
    run("forget", "--user", "u1", "--id", added["ids"][0])
    events = run("history", "--user", "u1", "--id", added["ids"][0])
    assert [e["event"] for e in events] == ["created", "updated", "deleted"]
    assert all(e.get("content") is None for e in events)
