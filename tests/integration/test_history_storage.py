"""An 'updated' event stores what changed of the previous metadata (a patch against the one its
memory's event before it recorded, with a whole copy every 32nd: functions.sql), and every reader
answers as when each event kept a whole copy: the history pages, export with history, as_of
reads, the deletion's cleanup. On the real embedded PostgreSQL, directly and through the Data API."""

from __future__ import annotations

import datetime as dt
import importlib.resources
import uuid
from typing import Any

import psycopg
import pytest

from rushmem.service import Memory
from rushmem_contract.models import MAX_METADATA_CHARS, MemoryChanges, MemoryEvent, NewMemory, metadata_chars

pytestmark = pytest.mark.both_backends

USER = "u-edits"


def _all_events(service: Memory, memory_id: uuid.UUID, *, limit: int) -> list[MemoryEvent]:
    """A memory's whole history, page by page (``limit`` events a page, so cursors are crossed)."""
    events: list[MemoryEvent] = []
    cursor = None
    while True:
        page = service.history(memory_id, user_id=USER, limit=limit, cursor=cursor)
        events += page.events
        cursor = page.next_cursor
        if cursor is None:
            return events


def _stored(database_url: str, memory_id: uuid.UUID) -> list[dict[str, Any]]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT event, content, detail, octet_length(detail::text) AS size FROM memory_events "
            "WHERE memory_id = %s ORDER BY at, id",
            [memory_id],
        ).fetchall()
    return [{"event": r[0], "content": r[1], "detail": r[2], "size": r[3]} for r in rows]


def _edits() -> list[dict[str, Any]]:
    """Content only, metadata only, both, a key removed, a key set to null, the other fields, and
    enough metadata edits to cross a checkpoint (every 32nd event stores a whole copy)."""
    steps: list[dict[str, Any]] = [
        {"metadata": {"team": "web", "tier": 1, "notes": "n" * 300, "gone": True}},
        {"content": "Prefers pnpm for every web project"},
        {"content": "Prefers pnpm for every project", "metadata": {"team": "api", "tier": 1, "notes": "n" * 300}},
        {"metadata": {"team": "api", "tier": 1}},  # a key removed
        {"metadata": {"team": "api", "tier": None, "extra": [1, 2]}},  # null is a value, not a removal
        {"category": "preference", "is_evergreen": True},
        {"metadata": None},  # cleared: {}
        {"metadata": {"team": "web"}},
    ]
    steps += [{"metadata": {"team": "web", "round": i, "notes": "x" * 200}} for i in range(40)]
    steps += [{"metadata": {"team": "web", "round": 40}, "content": "Prefers pnpm everywhere"}]
    return steps


def _expected(first: dict[str, Any], steps: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """What each 'updated' event answers (its content, its previous values), from the edits alone."""
    state = dict(first)
    expected = []
    for step in steps:
        new = {k: ({} if k == "metadata" and v is None else v) for k, v in step.items()}
        previous = {k: state[k] for k, v in new.items() if state[k] != v}
        state.update(new)
        expected.append((state["content"], {"previous": previous}))
    return expected


FIRST = {
    "content": "Prefers pnpm",
    "category": "fact",
    "is_evergreen": False,
    "metadata": {"team": "web", "notes": "n" * 300},
}


def _edited(service: Memory) -> uuid.UUID:
    memory_id = service.add([NewMemory(content=FIRST["content"], metadata=FIRST["metadata"])], user_id=USER).ids[0]
    for step in _edits():
        service.update(memory_id, MemoryChanges.model_validate(step), user_id=USER, source="api")
    return memory_id


def test_history_export_as_of_and_delete_answer_as_whole_copies_did(service: Memory, database_url: str) -> None:
    """The answers are those of the storage before 0022 (this test passes on it unchanged)."""
    memory_id = _edited(service)
    steps = _edits()
    # The history, whole and in pages of 7 (a page's fold starts before the cursor), answers each
    # edit's previous values whole, and the content after it.
    events = _all_events(service, memory_id, limit=1000)
    assert _all_events(service, memory_id, limit=7) == events
    assert [e.event for e in events] == ["created"] + ["updated"] * len(steps)
    assert [(e.content, e.detail) for e in events[1:]] == _expected(FIRST, steps)
    # The user's whole history (no memory id) answers the same events.
    everything = service.history(None, user_id=USER, limit=1000).events
    assert [e for e in everything if e.memory_id == memory_id] == events

    # Export with history: the same events on the memory's line.
    lines = service.export(user_id=USER, history=True, limit=500).lines
    (line,) = [line for line in lines if line.id == memory_id]
    assert line.history == events and line.history_cursor is None

    # as_of: before the first content edit, the first text; after the last, the last.
    content_edits = [e for e in events if "content" in e.detail.get("previous", {})]
    before = service.list(user_id=USER, as_of=content_edits[0].at - dt.timedelta(microseconds=1)).memories
    assert [m.content for m in before] == ["Prefers pnpm"]
    after = service.list(user_id=USER, as_of=content_edits[-1].at).memories
    assert [(m.id, m.content) for m in after] == [(memory_id, "Prefers pnpm everywhere")]

    # Deleted: no text and no metadata of it left, in the answer or in storage.
    service.delete(memory_id, user_id=USER)
    gone = _all_events(service, memory_id, limit=1000)
    assert gone[-1].event == "deleted" and all(e.content is None for e in gone)
    assert all(not {"content", "metadata"} & set(e.detail.get("previous", {})) for e in gone)
    for row in _stored(database_url, memory_id):
        assert row["content"] is None
        assert not {"content", "metadata", "metadata_patch"} & set(row["detail"].get("previous", {}))


def test_updated_events_store_the_changed_text_only_and_metadata_patches(service: Memory, database_url: str) -> None:
    memory_id = _edited(service)
    rows = [s for s in _stored(database_url, memory_id) if s["event"] == "updated"]
    # The text after the edit only where the edit changed it.
    assert [r["content"] is not None for r in rows] == ["content" in r["detail"]["previous"] for r in rows]
    assert sum(r["content"] is not None for r in rows) == 3
    stored = [r["detail"]["previous"] for r in rows]
    kinds = [
        next(k for k in ("metadata", "metadata_patch") if k in p)
        for p in stored
        if {"metadata", "metadata_patch"} & set(p)
    ]
    # A whole copy first, then at least every 32nd (or where a patch of a small object would not be smaller).
    runs = "".join("w" if k == "metadata" else "p" for k in kinds)
    assert runs[0] == "w" and "p" * 32 not in runs and runs.count("p") > len(runs) / 2


def _issue_metadata(i: int) -> dict[str, str]:
    """Issue 46's shape (metadata near its limit in many keys, one of which changes each time) at
    today's limit (MAX_METADATA_CHARS; the issue's 15,900 characters were under an older 16,000)."""
    metadata = {f"k{j:03d}": f"{j}-" + "v" * 140 for j in range(MAX_METADATA_CHARS // 100)}
    metadata["k000"] = f"changed {i}"
    while metadata_chars(metadata) > MAX_METADATA_CHARS - 20:
        metadata.popitem()
    return metadata


CHANGES = 322


def test_a_key_changed_322_times_stores_what_changed_not_322_copies(service: Memory, database_url: str) -> None:
    """Each event kept the whole previous metadata (~16 KB): 322 edits stored 5 MB of history.
    Now a one-key edit stores that key (a whole copy every 32nd), and the answers are unchanged."""
    memory_id = service.add([NewMemory(content="Profile", metadata=_issue_metadata(0))], user_id=USER).ids[0]
    for i in range(1, CHANGES + 1):
        service.update(memory_id, MemoryChanges(metadata=_issue_metadata(i)), user_id=USER)
    updated = [r for r in _stored(database_url, memory_id) if r["event"] == "updated"]
    whole = metadata_chars(_issue_metadata(0))
    stored = sum(r["size"] for r in updated)
    print(f"{CHANGES} edits of {whole} characters of metadata: {stored} bytes of stored detail")
    assert stored < CHANGES * whole / 10  # was > CHANGES * whole: one whole copy an event
    events = _all_events(service, memory_id, limit=1000)
    assert [e.detail["previous"]["metadata"] for e in events[1:]] == [_issue_metadata(i) for i in range(CHANGES)]


def test_events_stored_whole_read_the_same_and_the_migration_patches_them(service: Memory, database_url: str) -> None:
    """A store written before 0022 holds whole copies: read as they are, and 0022 turns them into
    patches without changing an answer."""
    memory_id = service.add([NewMemory(content="Profile", metadata=_issue_metadata(0))], user_id=USER).ids[0]
    for i in range(1, 70):
        service.update(memory_id, MemoryChanges(metadata=_issue_metadata(i)), user_id=USER)
    answered = _all_events(service, memory_id, limit=1000)
    folder = importlib.resources.files("rushmem.store") / "migrations"
    migration = (folder / "0022_updated_event_changes.sql").read_text(encoding="utf-8")
    with psycopg.connect(database_url) as conn:
        # The old form: every previous metadata whole.
        conn.execute("SET ROLE agent_memory_maintenance")
        with conn.transaction():
            for e in answered[1:]:
                conn.execute(
                    "UPDATE memory_events SET detail = %s, content = %s WHERE memory_id = %s AND at = %s",
                    [psycopg.types.json.Jsonb(e.detail), e.content, memory_id, e.at],
                )
        conn.execute("RESET ROLE")
    whole = sum(r["size"] + len(r["content"] or "") for r in _stored(database_url, memory_id))
    assert _all_events(service, memory_id, limit=9) == answered
    with psycopg.connect(database_url) as conn, conn.transaction():
        conn.execute(migration)
    patched = sum(r["size"] + len(r["content"] or "") for r in _stored(database_url, memory_id))
    assert patched < whole / 10
    assert _all_events(service, memory_id, limit=9) == answered
    # The trigger carries on from the migrated chain.
    service.update(memory_id, MemoryChanges(metadata=_issue_metadata(70)), user_id=USER)
    assert _all_events(service, memory_id, limit=1000)[-1].detail["previous"]["metadata"] == _issue_metadata(69)
