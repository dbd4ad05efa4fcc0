"""Recall's date leg and one-hop bonus on the real database: the date leg in the same single
statement as the vector and text legs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import psycopg

from rushmem.service import Memory
from rushmem_contract.models import ImportLine, MemoryFilters, NewMemory
from tests.support.db import round_trips

DAY = dt.datetime(2023, 5, 3, 15, tzinfo=dt.UTC)
NOW = dt.datetime(2023, 12, 1, tzinfo=dt.UTC)


def _at(days: int) -> dt.datetime:
    return DAY + dt.timedelta(days=days)


def test_the_entity_links_are_gone_from_a_migrated_store(service: Memory, database_url: str) -> None:
    service.add([NewMemory(content="Caroline moved to Lisbon from Sweden.")], user_id="u1")
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT to_regclass('memory_entities')").fetchone() == (None,)
        assert conn.execute("SELECT count(*) FROM agent_memory_meta WHERE key = 'entity_links_after'").fetchone() == (
            0,
        )


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
    plan = service.admin.recall_plan.but(date_boost=1.0)
    without = service.recall(query, user_id="u1", limit=1, now=NOW, plan=plan.but(date_k=0))
    with_leg = service.recall(query, user_id="u1", limit=1, now=NOW, plan=plan.but(date_k=10))
    assert without.memories[0].content != "Bought a red bicycle"  # neither the vector nor the text leg has it
    assert with_leg.memories[0].content == "Bought a red bicycle"  # the date leg does
    # The filters narrow the date leg too.
    filtered = service.recall(
        query, user_id="u1", limit=1, now=NOW, plan=plan.but(date_k=10), filters=MemoryFilters(categories=["decision"])
    )
    assert filtered.memories == []


def test_one_hop_lifts_what_was_stated_with_the_best_match(service: Memory) -> None:
    _filler(service, n=5)
    service.import_(
        [
            _line("The garden roses and apple trees got a new fence", DAY),
            _line("Zebra crossing near the station", DAY),  # said in the same conversation
        ]
    )
    query = "garden roses apple trees fence"
    # limit 3: 9 candidates per leg, so every memory is one; the hop bonus decides the second place.
    plan = service.admin.recall_plan.but(hop_seeds=1, hop_boost=1.0, date_k=0)
    without = service.recall(query, user_id="u1", limit=3, now=NOW, plan=plan.but(hop_seeds=0))
    with_hop = service.recall(query, user_id="u1", limit=3, now=NOW, plan=plan)
    assert (
        without.memories[0].content
        == with_hop.memories[0].content
        == "The garden roses and apple trees got a new fence"
    )
    assert "Zebra crossing near the station" not in [m.content for m in without.memories]
    assert with_hop.memories[1].content == "Zebra crossing near the station"


def test_every_leg_at_once_is_still_one_round_trip(service: Memory, tmp_path: Path) -> None:
    _filler(service)
    service.import_([_line("Caroline bought a red bicycle in Lisbon", DAY)])
    assert service.admin.recall_plan.date_k > 0 and service.admin.recall_plan.hop_seeds > 0
    result: list[Any] = []

    def recall() -> None:
        result.append(service.recall("What did Caroline buy in Lisbon on 3 May 2023?", user_id="u1", now=NOW))

    assert round_trips(service, recall, tmp_path) == 1
    assert result[0].memories[0].content == "Caroline bought a red bicycle in Lisbon"


def test_the_word_user_in_a_question_does_not_lift_every_memory_about_the_user(service: Memory) -> None:
    """Almost every memory is about "the user": the text leg searched that word too, and the text
    rank, scaled to the best match, gave every "The user ..." memory the full text weight for a
    question whose answer shares no other word with it (issue 45's absence cases: unrelated
    memories outranked the son's teacher)."""
    fillers = [
        "The user plays the cello on weekends.",
        "The user is allergic to peanuts.",
        "The user prefers TypeScript for new projects.",
    ]
    service.add([*fillers, "Mr. Novak is the son's class teacher at Riverside."], user_id="u1")
    answer = service.recall("Who teaches the user's boy?", user_id="u1", explain=True)
    assert answer.explanation is not None
    signals = {c.content: c.signals for c in answer.explanation.candidates}
    assert [signals[f].text_position for f in fillers] == [None, None, None]
    assert all(signals[f].text_rank == 0 for f in fillers)
    # A word the memory does hold still reaches it through the text leg.
    named = service.recall("Who is the user's son's teacher?", user_id="u1", explain=True)
    assert named.explanation is not None
    first = min(named.explanation.candidates, key=lambda c: c.signals.text_position or 99)
    assert first.content.startswith("Mr. Novak") and first.signals.text_rank == 1
