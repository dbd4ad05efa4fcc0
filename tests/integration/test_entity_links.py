"""Entity links for memories stored before migration 0007 (`agent-memory link-entities`, resumable),
and entities named by an LLM extractor (AGENT_MEMORY_LLM_ENTITIES) against a local chat server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from agent_memory.config import Settings
from agent_memory.extraction import create_extractor
from agent_memory.extraction.entities import extract_entities
from agent_memory.service import Memory
from agent_memory.store import entity_links
from agent_memory.store.connection import Database
from agent_memory.store.migrate import register_types
from agent_memory_contract.models import ConversationEnded, NewMemory
from agent_memory_tools.cli import main
from tests.ingest_support import ChatServer, Reply, memories_answer


def _links(database_url: str) -> set[tuple[str, str]]:
    with psycopg.connect(database_url) as conn:
        conn.execute("SET ROLE agent_memory_maintenance")
        rows = conn.execute(
            "SELECT m.content, e.entity_key FROM memory_entities e JOIN user_memories m ON m.id = e.memory_id"
        ).fetchall()
    return {(str(a), str(b)) for a, b in rows}


def _forget_links(database_url: str) -> None:
    """The state of a store migrated to 0007: memories without links, the backfill pending."""
    with psycopg.connect(database_url) as conn:
        conn.execute("SET ROLE agent_memory_maintenance")
        conn.execute("DELETE FROM memory_entities")
        conn.execute("UPDATE agent_memory_meta SET value = '' WHERE key = 'entity_links_after'")


def _state(database_url: str) -> str:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT value FROM agent_memory_meta WHERE key = 'entity_links_after'").fetchone()
    assert row is not None
    return str(row[0])


def test_earlier_memories_are_linked_in_resumable_batches(
    service: Memory, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    service.add([NewMemory(content=f"Caroline met Dana in Lisbon on trip {i}") for i in range(4)], user_id="u1")
    service.add([NewMemory(content="Bob flew to Oslo."), NewMemory(content="nothing named here")], user_id="u2")
    written = _links(database_url)
    _forget_links(database_url)
    owner = Settings(database_url=database_url, embedding_provider="hash")

    admin = Database(owner, setup=register_types)
    try:  # one batch, as an interrupted run leaves it
        read, added, last = entity_links.link_batch(admin.connection(), after=None, limit=2, extract=extract_entities)
    finally:
        admin.close()
    assert (read, last is not None) == (2, True)
    assert _state(database_url) == str(last)
    partial = _links(database_url)
    assert 0 < len(partial) == added < len(written)

    resumed = Memory(owner).admin.link_entities(batch_size=2)
    assert (resumed.memories, resumed.done) == (4, True)  # the four after the first batch
    assert _links(database_url) == written
    assert _state(database_url) == "done"

    assert main(["link-entities"], settings=owner) == 0  # nothing left
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"memories": 0, "links": 0, "done": True}
    assert main(["link-entities", "--restart", "--batch-size", "4"], settings=owner) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"memories": 6, "links": 0, "done": True}


def test_a_time_budget_stops_between_batches(service: Memory, database_url: str) -> None:
    service.add([NewMemory(content=f"Erik visited Bergen, stop {i}") for i in range(3)], user_id="u1")
    _forget_links(database_url)
    stopped = Memory(Settings(database_url=database_url, embedding_provider="hash")).admin.link_entities(
        batch_size=1, max_seconds=0
    )
    assert (stopped.memories, stopped.done) == (0, False)
    assert _state(database_url) == ""


# ---- entities named by an LLM extractor ----------------------------------------------------------


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def _llm(settings: Settings, server: ChatServer, entities: bool) -> Memory:
    llm = {
        "llm_provider": "openai",
        "llm_base_url": server.base_url,
        "llm_api_key": "sk-test",
        "llm_model": "glm-4-flash",
        "max_retries": 0,
        "llm_entities": entities,
    }
    merged = Settings.model_validate({**settings.model_dump(), **llm})
    return Memory(merged, extractor=create_extractor(merged))


DOG: dict[str, Any] = {
    "content": "The user's dog is named rex.",
    "category": "fact",
    "entities": ["Rex", "the dog park"],
}


@pytest.mark.parametrize("asked", [True, False])
def test_an_llm_may_name_the_entities_it_links(
    settings: Settings, server: ChatServer, database_url: str, asked: bool
) -> None:
    server.script(Reply(body=memories_answer(DOG)))
    service = _llm(settings, server, asked)
    try:
        message = ConversationEnded.model_validate(
            {"user_id": "u1", "conversation_id": "c1", "messages": [{"role": "user", "content": "My dog is rex."}]}
        )
        assert service.ingest_conversation(message).created == 1
    finally:
        service.close()
    system = server.requests[0].json["messages"][0]["content"]
    assert ('"entities"' in system) is asked  # the prompt asks only when configured
    # What the model names is linked either way (the rules alone find nothing capitalised here).
    assert {key for _, key in _links(database_url)} == {"rex", "dog park"}
