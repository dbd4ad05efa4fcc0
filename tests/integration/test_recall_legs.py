"""The optional candidate legs of recall (dates, entities, one hop) and the entity links they
read, on the real database: all in the same single statement as the vector and text legs."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent_memory.service import Memory
from agent_memory.store.connection import Connection
from agent_memory.store.recall import ExtraLegs, hybrid_candidates
from agent_memory.store.scope import Scope
from agent_memory.store.transactions import user_transaction
from agent_memory_contract.models import ImportLine, MemoryChanges, MemoryFilters, NewMemory
from tests.integration.test_sql_efficiency import _round_trips

DAY = dt.datetime(2023, 5, 3, 15, tzinfo=dt.UTC)
NOW = dt.datetime(2023, 12, 1, tzinfo=dt.UTC)


def _at(days: int) -> dt.datetime:
    return DAY + dt.timedelta(days=days)


def _links(database_url: str, user_id: str) -> set[tuple[str, str]]:
    """(memory content, entity key) pairs of a user, read as the owner (no row-level security)."""
    with psycopg.connect(database_url) as conn:
        conn.execute("SET ROLE agent_memory_maintenance")
        rows = conn.execute(
            "SELECT m.content, e.entity_key FROM memory_entities e JOIN user_memories m ON m.id = e.memory_id"
            " WHERE e.user_id = %s",
            [user_id],
        ).fetchall()
    return {(str(a), str(b)) for a, b in rows}


def test_memories_are_linked_to_the_entities_they_name_and_lose_them_with_the_memory(
    service: Memory, database_url: str
) -> None:
    ids = service.add(
        [
            NewMemory(content="Caroline moved to Lisbon from Sweden."),
            NewMemory(content="the user prefers tea"),
            NewMemory(content="notes from the trip", entities=["Cliffs of Moher", "Galway"]),  # named by an LLM
        ],
        user_id="u1",
    ).ids
    service.add([NewMemory(content="Bob lives in Lisbon.")], user_id="u2")
    assert _links(database_url, "u1") == {
        ("Caroline moved to Lisbon from Sweden.", "caroline"),
        ("Caroline moved to Lisbon from Sweden.", "lisbon"),
        ("Caroline moved to Lisbon from Sweden.", "sweden"),
        ("notes from the trip", "cliffs of moher"),
        ("notes from the trip", "galway"),
    }
    assert service.delete(ids[0], user_id="u1")
    assert {key for _, key in _links(database_url, "u1")} == {"cliffs of moher", "galway"}
    assert _links(database_url, "u2") == {("Bob lives in Lisbon.", "bob"), ("Bob lives in Lisbon.", "lisbon")}
    receipt = service.forget_user("u2")
    assert (receipt.deleted.memories, receipt.deleted.entity_links) == (1, 2)
    assert _links(database_url, "u2") == set()


def test_an_edited_content_is_linked_anew_and_an_import_restores_links(service: Memory, database_url: str) -> None:
    memory_id = service.add([NewMemory(content="Caroline moved to Lisbon.")], user_id="u1").ids[0]
    service.update(memory_id, MemoryChanges(content="Caroline moved to Porto."), user_id="u1")
    porto = "Caroline moved to Porto."
    assert _links(database_url, "u1") == {(porto, "caroline"), (porto, "porto")}
    restored = ImportLine(user_id="u3", id=uuid.uuid4(), content="Dana visited Oslo.", created_at=DAY)
    service.import_([restored, ImportLine(user_id="u3", content="Erik visited Bergen.")])
    assert {key for _, key in _links(database_url, "u3")} == {"dana", "oslo", "erik", "bergen"}


def test_row_level_security_hides_other_users_links(service: Memory) -> None:
    service.add([NewMemory(content="Caroline went to Lisbon.")], user_id="u1")
    service.add([NewMemory(content="Bob went to Lisbon.")], user_id="u2")

    def seen_as(user: str) -> list[Any]:
        def read(conn: Connection) -> list[Any]:
            with user_transaction(conn, user):
                return conn.execute("SELECT user_id, entity_key FROM memory_entities ORDER BY 2").fetchall()

        rows: list[Any] = service.admin.db.run(read)
        return rows

    assert seen_as("u2") == [("u2", "bob"), ("u2", "lisbon")]

    def write_for_other(conn: Connection) -> None:
        with user_transaction(conn, "u2"):
            conn.execute(
                "INSERT INTO memory_entities (user_id, entity_key, memory_id) VALUES ('u1', 'x', %s)", [uuid.uuid4()]
            )

    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        service.admin.db.run(write_for_other, retry=False)


def _line(content: str, at: dt.datetime, user: str = "u1") -> ImportLine:
    return ImportLine(user_id=user, content=content, created_at=at)


def _filler(service: Memory, n: int = 40) -> None:
    # Memories about one subject, each stated on its own day (none on DAY).
    service.import_([_line(f"Fact {i} about the garden, the roses and the apple trees", _at(30 + i)) for i in range(n)])


def test_the_date_leg_fetches_what_was_stated_on_the_named_day(service: Memory) -> None:
    _filler(service)
    service.import_([_line("Bought a red bicycle", DAY)])
    query = "What happened in the garden on 3 May 2023?"
    # A date boost that outweighs everything: whatever the legs fetched from that day comes first.
    options = service.admin.recall_options.but(date_boost=1.0)
    without = service.recall(query, user_id="u1", limit=1, now=NOW, options=options.but(date_k=0))
    with_leg = service.recall(query, user_id="u1", limit=1, now=NOW, options=options.but(date_k=10))
    assert without.memories[0].content != "Bought a red bicycle"  # neither the vector nor the text leg has it
    assert with_leg.memories[0].content == "Bought a red bicycle"  # the date leg does
    # The filters narrow the date leg too.
    filtered = service.recall(
        query,
        user_id="u1",
        limit=1,
        now=NOW,
        options=options.but(date_k=10),
        filters=MemoryFilters(categories=["decision"]),
    )
    assert filtered.memories == []


def test_one_hop_brings_in_what_was_stated_with_the_best_match(service: Memory) -> None:
    _filler(service)
    service.import_(
        [
            _line("The garden roses and apple trees got a new fence", DAY),
            _line("Zebra crossing near the station", DAY),  # said in the same conversation
        ]
    )
    query = "garden roses apple trees fence"
    options = service.admin.recall_options.but(hop_seeds=1, hop_k=5, hop_boost=1.0, date_k=0)
    without = service.recall(query, user_id="u1", limit=2, now=NOW, options=options.but(hop_seeds=0))
    with_hop = service.recall(query, user_id="u1", limit=2, now=NOW, options=options)
    assert (
        without.memories[0].content
        == with_hop.memories[0].content
        == "The garden roses and apple trees got a new fence"
    )
    assert "Zebra crossing near the station" not in [m.content for m in without.memories]
    assert with_hop.memories[1].content == "Zebra crossing near the station"


def test_the_entity_leg_takes_rare_entities_only(service: Memory) -> None:
    service.import_([_line(f"Caroline watered plant number {i}", _at(i)) for i in range(12)])
    service.import_([_line("A letter arrived from Zanzibar", _at(20))])
    legs = ExtraLegs(entities=("caroline", "zanzibar"), entity_k=10, entity_cap=5)
    scope = Scope("u1", None, now=NOW)
    vector = service.admin.embedder.embed_query("plants")
    found = service.admin.db.run(lambda conn: hybrid_candidates(conn, scope, vector, "plants", 3, legs=legs))
    by_entity = [c.content for c in found if c.in_entity]
    assert by_entity == ["A letter arrived from Zanzibar"]  # "caroline" is on 12 memories: above the cap


def test_the_entity_hop_carries_the_shared_rare_entities(service: Memory) -> None:
    service.import_(
        [
            _line("The garden roses are blooming in Zanzibar", _at(1)),
            _line("A parcel came from Zanzibar", _at(2)),
            *[_line(f"Fact {i} about the weather", _at(10 + i)) for i in range(20)],
        ]
    )
    legs = ExtraLegs(hop_seeds=1, hop_k=5, hop_entities=True, entity_cap=5)
    scope = Scope("u1", None, now=NOW)
    vector = service.admin.embedder.embed_query("garden roses")
    found = service.admin.db.run(lambda conn: hybrid_candidates(conn, scope, vector, "garden roses", 2, legs=legs))
    hop = {c.content: c.entities for c in found if c.in_hop}
    assert hop.get("A parcel came from Zanzibar") == ("zanzibar",)


def test_every_leg_at_once_is_still_one_round_trip(service: Memory, tmp_path: Path) -> None:
    _filler(service)
    service.import_([_line("Caroline bought a red bicycle in Lisbon", DAY)])
    options = service.admin.recall_options.but(
        date_k=10, entity_k=10, entity_boost=0.05, hop_seeds=3, hop_k=5, hop_boost=0.1, hop_entities=True
    )
    result: list[Any] = []

    def recall() -> None:
        result.append(
            service.recall("What did Caroline buy in Lisbon on 3 May 2023?", user_id="u1", now=NOW, options=options)
        )

    assert _round_trips(service, recall, tmp_path) == 1
    assert result[0].memories[0].content == "Caroline bought a red bicycle in Lisbon"
