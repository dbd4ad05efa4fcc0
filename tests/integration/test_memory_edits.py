"""Reading and editing one memory by id (Memory.get / update) on the real
embedded PostgreSQL: scoping, re-embedding, clashes with another memory, the history."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from pydantic import ValidationError

from rushmem.service import Memory
from rushmem_contract.errors import Conflict, InputTooLarge, NotFound
from rushmem_contract.models import MemoryChanges, NewMemory, content_hash

# The same behaviour on a connection and through the RDS Data API (tests/support/data_api.py).
pytestmark = pytest.mark.both_backends


def one(service: Memory, user: str, content: str, **fields: Any) -> uuid.UUID:
    project_id = fields.pop("project_id", None)
    return service.add([NewMemory(content=content, **fields)], user_id=user, project_id=project_id).ids[0]


def test_get_memory_is_the_users_own_and_another_users_id_is_not_found(service: Memory) -> None:
    mine = one(service, "u1", "Prefers pnpm over npm", category="preference", metadata={"team": "web"})
    memory = service.get(mine, user_id="u1")
    assert (memory.id, memory.content, memory.category, memory.metadata) == (
        mine, "Prefers pnpm over npm", "preference", {"team": "web"}
    )  # fmt: skip
    with pytest.raises(NotFound) as other:
        service.get(mine, user_id="u2")
    with pytest.raises(NotFound) as none:
        service.get(uuid.uuid4(), user_id="u1")
    assert str(other.value) == str(none.value)  # the same answer: nothing leaks


def test_update_content_reembeds_rehashes_refreshes_and_records_the_previous_value(
    service: Memory, database_url: str
) -> None:
    memory_id = one(service, "u1", "Prefers npm", created_at=dt.datetime(2025, 1, 1, tzinfo=dt.UTC))
    before = service.get(memory_id, user_id="u1")
    updated = service.update(memory_id, MemoryChanges(content="Prefers pnpm  now"), user_id="u1", source="api")
    assert updated.content == "Prefers pnpm now" and updated.id == memory_id
    assert updated.updated_at > before.updated_at and updated.created_at == before.created_at
    # Recall finds it by its new words (full text and vector) and not by the old ones' hash.
    assert [m.id for m in service.recall("pnpm", user_id="u1").memories] == [memory_id]
    with psycopg.connect(database_url) as conn:
        register_vector(conn)
        stored = conn.execute("SELECT content_hash, embedding FROM user_memories WHERE id = %s", [memory_id]).fetchone()
    assert stored is not None
    assert bytes(stored[0]) == content_hash("Prefers pnpm now")
    assert np.allclose(stored[1].to_numpy(), service.admin.embedder.embed(["Prefers pnpm now"])[0], atol=1e-6)
    events = service.history(memory_id, user_id="u1").events
    assert [e.event for e in events] == ["created", "updated"]
    assert events[-1].source == "api" and events[-1].content == "Prefers pnpm now"
    assert events[-1].detail == {"previous": {"content": "Prefers npm"}}
    # The same content written again is the updated memory, not a new one.
    assert service.add([NewMemory(content="prefers pnpm now.")], user_id="u1").ids == [memory_id]


def test_update_other_fields_and_null_clears_expiry_and_metadata(service: Memory) -> None:
    expires = dt.datetime(2999, 1, 1, tzinfo=dt.UTC)
    memory_id = one(service, "u1", "Works on the billing service", metadata={"a": 1}, expires_at=expires)
    before = service.get(memory_id, user_id="u1")
    changes = MemoryChanges.model_validate(
        {"category": "project", "is_evergreen": True, "metadata": {"b": 2}, "expires_at": None}
    )
    updated = service.update(memory_id, changes, user_id="u1", source="cli")
    assert (updated.category, updated.is_evergreen, updated.metadata, updated.expires_at) == (
        "project", True, {"b": 2}, None
    )  # fmt: skip
    assert updated.updated_at == before.updated_at  # no new statement: time decay is unchanged
    cleared = service.update(memory_id, MemoryChanges.model_validate({"metadata": None}), user_id="u1")
    assert cleared.metadata == {}
    (_created, first, second) = service.history(memory_id, user_id="u1").events
    assert first.event == second.event == "updated"
    assert first.detail["previous"] == {
        "category": "fact", "is_evergreen": False, "metadata": {"a": 1}, "expires_at": "2999-01-01T00:00:00+00:00"
    }  # fmt: skip
    # Nothing given: nothing written, no event.
    assert service.update(memory_id, MemoryChanges(), user_id="u1") == cleared
    assert len(service.history(memory_id, user_id="u1").events) == 3


def test_update_refuses_null_for_what_cannot_be_cleared_and_unknown_fields() -> None:
    for field in ("content", "category", "is_evergreen"):
        with pytest.raises(ValidationError) as info:
            MemoryChanges.model_validate({field: None})
        assert info.value.errors()[0]["loc"] == (field,)
    with pytest.raises(ValidationError) as unknown:
        MemoryChanges.model_validate({"user_id": "x"})
    assert unknown.value.errors()[0]["loc"] == ("user_id",)
    with pytest.raises(ValidationError):
        MemoryChanges.model_validate({"content": "   "})


def test_a_content_another_memory_of_the_scope_states_is_a_conflict_naming_it(service: Memory) -> None:
    a = one(service, "u1", "Prefers pnpm")
    b = one(service, "u1", "Prefers yarn")
    elsewhere = one(service, "u1", "Prefers bun", project_id="p1")
    with pytest.raises(Conflict) as clash:
        service.update(b, MemoryChanges(content="prefers PNPM."), user_id="u1")
    assert clash.value.field == "content" and str(a) in str(clash.value)
    assert service.get(b, user_id="u1").content == "Prefers yarn"  # nothing changed
    # Another scope (a project) is another key: no clash.
    assert service.update(elsewhere, MemoryChanges(content="Prefers pnpm"), user_id="u1").content == "Prefers pnpm"
    # Its own content in other words (same hash) is no clash either.
    assert service.update(a, MemoryChanges(content="Prefers PNPM"), user_id="u1").content == "Prefers PNPM"


def test_update_of_another_users_memory_is_not_found_and_changes_nothing(service: Memory) -> None:
    mine = one(service, "u1", "Prefers pnpm")
    with pytest.raises(NotFound):
        service.update(mine, MemoryChanges(category="identity"), user_id="u2")
    with pytest.raises(NotFound):
        service.update(mine, MemoryChanges(content="Prefers yarn"), user_id="u2")
    assert service.get(mine, user_id="u1").category == "fact"
    assert [e.event for e in service.history(mine, user_id="u1").events] == ["created"]


def test_update_content_longer_than_the_setting_is_too_large(service: Memory) -> None:
    mine = one(service, "u1", "short")
    too_long = "x" * (service.settings.max_memory_chars + 1)
    with pytest.raises(InputTooLarge) as info:
        service.update(mine, MemoryChanges(content=too_long), user_id="u1")
    assert info.value.field == "content"
