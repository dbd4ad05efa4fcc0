"""The pure steps of issue 45's depends-on links: which residence facts a fact names (the rules
extractor's links), a model's "f2"/"m1" references kept through the parsing and mapped, what recall
leaves out for staleness and the line the block then carries."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid

import numpy as np
import pytest

from rushmem.extraction.dependencies import place_dependencies, residence_place
from rushmem.extraction.parsing import validate_items
from rushmem.extraction.prompt import system_prompt
from rushmem.extraction.rules import RulesExtractor
from rushmem.extraction.updates import resolve_updates
from rushmem.recall.block import assemble_block
from rushmem.recall.stale import ABSENCE_LINE, STALE_NOTE, absence_block, leave_out_stale, with_note
from rushmem.records import Candidate, ExistingMemory
from rushmem_contract.models import ChatMessage

NOW = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)


def _candidate(content: str, *, stale: bool = False) -> Candidate:
    return Candidate(
        id=uuid.uuid4(), user_id="u", project_id=None, content=content, category="fact", source=None,
        is_evergreen=False, created_at=NOW, updated_at=NOW, expires_at=None, superseded_by=None,
        superseded_at=None, metadata={}, embedding=np.zeros(3, dtype=np.float32), distance=0.5, text_rank=0.0,
        in_vector=True, in_text=False, stale_at=NOW - dt.timedelta(days=1) if stale else None,
        stale_because=uuid.uuid4() if stale else None, stale_reason="superseded" if stale else None,
    )  # fmt: skip


# ---- the rules extractor's links ------------------------------------------------------------------


def test_a_fact_naming_the_home_city_follows_from_the_residence_fact() -> None:
    facts = [
        "The user lives in Berlin.",
        "The user's gym is the climbing hall in Berlin Mitte.",
        "The user prefers TypeScript.",
        "The user's dentist is in Potsdam.",
    ]
    assert place_dependencies(facts) == [[], [0], [], []]
    assert residence_place("The user moved to New York.") == "New York"
    assert residence_place("The user's gym is in Berlin.") is None


# Written after the rule, not read while writing it: (conversation, facts that should follow from the
# residence fact, facts linked). Measured: 3 of 5 links, no wrong one. The time zone and the commute
# without the city are what it cannot see (0 by design); the two misses are the extraction's before
# it: "based in Oslo; my ..." stays one memory (a semicolon does not split), and "I just moved to
# Lisbon and ..." yields no residence fact.
HELD_OUT = [
    ("I live in Munich. My bakery is the one on the corner in Munich Schwabing.", 1, 1),
    ("I'm based in Oslo; my coworking space is in downtown Oslo.", 1, 0),
    ("I just moved to Lisbon and I take the ferry across the Tagus from Lisbon every day.", 1, 0),
    ("I live in Vienna. My favourite cafe in Vienna is Cafe Sperl. My dentist is in Vienna too.", 2, 2),
    ("I live in Porto. My time zone is Western European Time.", 0, 0),
    ("I live in Madrid. My commute is forty minutes by metro.", 0, 0),
]


@pytest.mark.parametrize(("said", "should", "linked"), HELD_OUT)
def test_the_rules_extractor_links_what_it_can_see(said: str, should: int, linked: int) -> None:
    assert linked <= should  # never a wrong link
    memories = RulesExtractor().extract([ChatMessage(role="user", content=said)]).memories
    assert sum(1 for m in memories if m.depends_on) == linked, [(m.content, m.depends_on) for m in memories]


# ---- a model's references -------------------------------------------------------------------------


def test_a_models_references_survive_dropped_facts_and_map_to_ids_and_places() -> None:
    shown = ExistingMemory(handle="m1", id=uuid.uuid4(), content="The user works at Acme.", category="fact",
                           project_id=None, embedding=np.ones(3, dtype=np.float32) / np.sqrt(3))  # fmt: skip
    items = [
        {"content": ""},  # invalid: dropped, so "f3" below is the second fact kept
        {"content": "The user lives in Berlin."},
        {"content": "The user's gym is in Kreuzberg.", "depends_on": ["f2"]},
        {"content": "The user's manager is Priya.", "depends_on": ["M1", "f9", "f4"]},
    ]
    extraction = validate_items(items, max_items=10, max_chars=500)
    facts = extraction.memories
    assert [f.content for f in facts][1:] == ["The user's gym is in Kreuzberg.", "The user's manager is Priya."]
    vectors = [np.ones(3, dtype=np.float32) / np.sqrt(3)] * len(facts)
    updates = resolve_updates(facts, vectors, [shown], min_similarity=0.5)
    assert updates[1].depends_within == (0,)
    # m1 is the shown memory; f9 names no fact and f4 the fact itself: both dropped.
    assert updates[2].depends_on == (shown.id,) and updates[2].depends_within == ()


def test_the_prompt_asks_for_depends_on_and_names_shown_ids_only_when_shown() -> None:
    alone, shown = system_prompt(10), system_prompt(10, with_existing=True)
    assert '"depends_on"' in alone and '"f1"' in alone and '"m2"' not in alone
    assert '"m2"' in shown


# ---- recall -----------------------------------------------------------------------------------------


def test_stale_memories_are_left_out_and_the_answer_still_fills_its_limit() -> None:
    ranked = [(_candidate("gym", stale=True), 0.9), (_candidate("home"), 0.8), (_candidate("cello"), 0.7)]
    dropped, line = leave_out_stale(ranked, {}, at=NOW, limit=2)
    assert (
        dropped[0][0] == "stale" and "superseded" in dropped[0][1] and str(ranked[0][0].stale_because) in dropped[0][1]
    )
    assert 1 not in dropped and 2 not in dropped and line == STALE_NOTE
    # With one place, the current one past it goes.
    dropped, _ = leave_out_stale(ranked, {}, at=NOW, limit=1)
    assert dropped[2][0] == "past_limit"


def test_the_absence_line_when_nothing_current_is_kept() -> None:
    ranked = [(_candidate("gym", stale=True), 0.9), (_candidate("cello"), 0.2)]
    dropped, line = leave_out_stale(ranked, {1: ("below_relative_score", "far below")}, at=NOW, limit=5)
    assert line == ABSENCE_LINE and set(dropped) == {0, 1}
    assert absence_block().splitlines()[-2] == ABSENCE_LINE
    # A stale memory the cut would have left out says nothing.
    _, quiet = leave_out_stale(ranked, {0: ("below_min_score", "low")}, at=NOW, limit=5)
    assert quiet is None


def test_a_memory_that_went_stale_after_the_read_time_is_current_then() -> None:
    stale = dataclasses.replace(_candidate("gym", stale=True), stale_at=NOW)
    dropped, line = leave_out_stale([(stale, 0.9)], {}, at=NOW - dt.timedelta(days=2), limit=5)
    assert dropped == {} and line is None


def test_the_note_goes_above_the_memories() -> None:
    block = with_note(assemble_block(["The user lives in Lisbon."]), STALE_NOTE)
    lines = block.splitlines()
    assert lines[lines.index(STALE_NOTE) + 1] == "Relevant memories:"
