"""Recall and list filters (categories, metadata containment, creation window) on the real
embedded PostgreSQL: they narrow every leg of the candidate SQL, and a user still gets
min(limit, their matching memories) however many rows other users have."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import ValidationError

from rushmem.service import Memory
from rushmem_contract.models import ImportLine, MemoryFilters, NewMemory
from tests.support.db import round_trips

JAN, FEB, MAR = (dt.datetime(2026, m, 1, tzinfo=dt.UTC) for m in (1, 2, 3))


@pytest.fixture
def stored(service: Memory) -> dict[str, str]:
    memories = [
        NewMemory(content="Prefers TypeScript for the editor", category="preference", created_at=JAN,
                  metadata={"team": "web", "tags": ["lang", "ui"]}),
        NewMemory(content="Decided to ship the TypeScript editor in March", category="decision", created_at=FEB,
                  metadata={"team": "web", "tags": ["plan"]}),
        NewMemory(content="TypeScript strict mode is on in the billing service", category="fact", created_at=MAR,
                  metadata={"team": "billing", "nested": {"env": "prod"}}),
    ]  # fmt: skip
    ids = service.add(memories, user_id="u1").ids
    service.add(
        [NewMemory(content="Prefers TypeScript too", category="preference", metadata={"team": "web"})], user_id="u2"
    )
    return {"pref": str(ids[0]), "decision": str(ids[1]), "fact": str(ids[2])}


def recalled(service: Memory, **filters: object) -> set[str]:
    result = service.recall("TypeScript editor", user_id="u1", filters=MemoryFilters.model_validate(filters))
    return {str(m.id) for m in result.memories}


def listed(service: Memory, **filters: object) -> set[str]:
    page = service.list(user_id="u1", filters=MemoryFilters.model_validate(filters))
    return {str(m.id) for m in page.memories}


@pytest.mark.parametrize("read", [recalled, listed], ids=["recall", "list"])
def test_each_filter_narrows_recall_and_list_alike(service: Memory, stored: dict[str, str], read: object) -> None:
    assert callable(read)
    assert read(service) == set(stored.values())
    assert read(service, categories=["preference", "decision"]) == {stored["pref"], stored["decision"]}
    assert read(service, metadata={"team": "web"}) == {stored["pref"], stored["decision"]}
    assert read(service, metadata={"tags": ["ui"]}) == {stored["pref"]}  # arrays match by containment
    assert read(service, metadata={"nested": {"env": "prod"}}) == {stored["fact"]}
    assert read(service, created_after=FEB) == {stored["decision"], stored["fact"]}  # inclusive
    assert read(service, created_before=FEB) == {stored["pref"]}  # exclusive
    assert read(service, created_after=JAN, created_before=MAR, metadata={"team": "web"}, categories=["decision"]) == {
        stored["decision"]
    }
    assert read(service, categories=["identity"]) == set()


def test_bad_filters_name_the_field() -> None:
    cases = {
        "categories": {"categories": ["colour"]},
        "metadata": {"metadata": ["not", "an", "object"]},
        "created_before": {"created_after": MAR.isoformat(), "created_before": JAN.isoformat()},
        "created_after": {"created_after": "yesterday"},
        "unknown": {"unknown": 1},
    }
    for field, filters in cases.items():
        with pytest.raises(ValidationError) as info:
            MemoryFilters.model_validate(filters)
        assert info.value.errors()[0]["loc"][0] == field, filters


def test_a_filtered_recall_still_gets_every_matching_memory_among_many_users(
    service: Memory, database_url: str
) -> None:
    # Many other users' rows that match the query better: an HNSW scan filtered to u1's few
    # decisions comes back short, and the exact fallback must find them all.
    service.add(
        [NewMemory(content=f"Note {i} about the TypeScript build", category="fact") for i in range(40)], user_id="u1"
    )
    decisions = service.add(
        [NewMemory(content=f"Decision {i}: TypeScript build on CI", category="decision") for i in range(3)],
        user_id="u1",
    ).ids
    service.import_(
        [ImportLine(user_id=f"other-{n}", content=f"TypeScript build tip {i}") for n in range(5) for i in range(300)]
    )
    with psycopg.connect(database_url) as conn:
        count = conn.execute("SELECT count(*) FROM user_memories").fetchone()
    assert count is not None and count[0] == 1543
    only = MemoryFilters(categories=["decision"])
    result = service.recall("TypeScript build", user_id="u1", limit=10, filters=only)
    assert {m.id for m in result.memories} == set(decisions)
    facts = service.recall("TypeScript build", user_id="u1", limit=10, filters=MemoryFilters(categories=["fact"]))
    assert len(facts.memories) == 10 and all(m.category == "fact" for m in facts.memories)


def test_a_filtered_recall_is_still_one_round_trip(service: Memory, tmp_path: Path) -> None:
    service.add(
        [NewMemory(content=f"Fact {i} about the SVG editor", metadata={"team": "web"}) for i in range(40)], user_id="u1"
    )
    filters = MemoryFilters(categories=["fact"], metadata={"team": "web"}, created_before=dt.datetime(2999, 1, 1))
    found: list[Any] = []
    assert (
        round_trips(
            service, lambda: found.append(service.recall("SVG editor", user_id="u1", filters=filters)), tmp_path
        )
        == 1
    )
    result = found[0]
    assert len(result.memories) == 10
