"""Memory lifecycle in the store: history, supersession, expiry, purge."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest

from rushmem.service import Memory
from rushmem_contract.models import NewMemory
from tests.support.ingest import supersede

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def one(service: Memory, user: str, text: str, **kwargs: object):  # type: ignore[no-untyped-def]
    return service.add([NewMemory(content=text)], user_id=user, **kwargs).ids[0]  # type: ignore[arg-type]


def test_every_change_is_in_the_history(service: Memory) -> None:
    old = one(service, "u1", "The user prefers JavaScript", source="c-1", observed_at=T0)
    one(service, "u1", "the user prefers javascript", source="c-2", observed_at=T0 + dt.timedelta(days=1))
    new = one(service, "u1", "The user now prefers TypeScript over JavaScript", source="c-3")
    assert supersede(service, "u1", [old], new, source="c-3") == [old]
    events = service.history(old, user_id="u1").events
    assert [(e.event, e.source) for e in events] == [("created", "c-1"), ("refreshed", "c-2"), ("superseded", "c-3")]
    assert events[-1].related_id == new
    assert all(e.content == "The user prefers JavaScript" for e in events)
    service.delete(new, user_id="u1", source="api")
    assert [(e.event, e.source) for e in service.history(new, user_id="u1").events] == [
        ("created", "c-3"),
        ("deleted", "api"),
    ]


def test_a_redelivery_adds_no_history(service: Memory) -> None:
    mid = one(service, "u1", "Uses pnpm", source="c-1", observed_at=T0)
    one(service, "u1", "Uses pnpm", source="c-1", observed_at=T0)
    assert [e.event for e in service.history(mid, user_id="u1").events] == ["created"]


def test_superseded_memories_leave_recall_but_can_be_shown(service: Memory) -> None:
    old = one(service, "u1", "The user prefers JavaScript")
    new = one(service, "u1", "The user prefers TypeScript")
    supersede(service, "u1", [old], new)
    assert [m.content for m in service.recall("prefers", user_id="u1").memories] == ["The user prefers TypeScript"]
    everything = service.recall("prefers", user_id="u1", include_inactive=True)
    assert {m.content for m in everything.memories} == {"The user prefers JavaScript", "The user prefers TypeScript"}
    assert (
        len(service.list(user_id="u1").memories) == 1
        and len(service.list(user_id="u1", include_inactive=True).memories) == 2
    )


def test_a_user_cannot_supersede_another_users_memory(service: Memory) -> None:
    theirs = one(service, "bob", "Bob prefers Go")
    mine = one(service, "alice", "Alice prefers Rust")
    assert supersede(service, "alice", [theirs], mine) == []
    assert len(service.recall("prefers", user_id="bob").memories) == 1


def test_expired_memories_leave_recall_and_are_purged(service: Memory) -> None:
    service.add(
        [
            NewMemory(content="The user is on holiday until Friday", expires_at=T0 + dt.timedelta(days=3)),
            NewMemory(content="The user prefers TypeScript"),
        ],
        user_id="u1",
        observed_at=T0,
    )
    before = service.recall("holiday TypeScript", user_id="u1", now=T0 + dt.timedelta(days=1))
    assert len(before.memories) == 2
    after = service.recall("holiday TypeScript", user_id="u1", now=T0 + dt.timedelta(days=4))
    assert [m.content for m in after.memories] == ["The user prefers TypeScript"]
    assert service.admin.purge(now=T0 + dt.timedelta(days=4)) == {"expired": 1, "superseded": 0}
    events = service.history(user_id="u1").events
    assert [e.event for e in events if (e.content or "").startswith("The user is on holiday")] == ["created", "expired"]


def test_purge_keeps_recently_superseded_memories(service: Memory) -> None:
    old = one(service, "u1", "Old fact")
    new = one(service, "u1", "New fact")
    supersede(service, "u1", [old], new)
    assert service.admin.purge(superseded_days=90) == {"expired": 0, "superseded": 0}
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=91)
    assert service.admin.purge(now=later, superseded_days=90) == {"expired": 0, "superseded": 1}
    assert [e.event for e in service.history(old, user_id="u1").events] == ["created", "superseded", "purged"]


def test_restating_a_superseded_fact_revives_it(service: Memory) -> None:
    old = one(service, "u1", "The user prefers tabs")
    new = one(service, "u1", "The user prefers spaces")
    supersede(service, "u1", [old], new)
    assert one(service, "u1", "The user prefers tabs") == old
    assert "revived" in [e.event for e in service.history(old, user_id="u1").events]
    assert len(service.recall("prefers", user_id="u1").memories) == 2


def test_forgetting_a_user_deletes_their_history_only(service: Memory, database_url: str) -> None:
    one(service, "u1", "fact one")
    one(service, "u2", "fact two")
    service.forget_user("u1")
    assert service.history(user_id="u1").events == []
    assert [e.event for e in service.history(user_id="u2").events] == ["created"]
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM memory_events WHERE user_id = 'u1'").fetchone() == (0,)


@pytest.mark.parametrize("limit", [0, 10_001])
def test_history_limit_is_checked(service: Memory, limit: int) -> None:
    from rushmem_contract.errors import InvalidInput

    with pytest.raises(InvalidInput):
        service.history(user_id="u1", limit=limit)
