"""Other systems' formats (rushmem_tools.formats): pure conversions, each refusal naming its record
and field."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid

import pytest

from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import ImportLine
from rushmem_tools.formats import chat, mem0, oms, parse_document

UTC = dt.UTC


def test_a_json_lines_file_reads_as_its_records_and_a_broken_line_is_named() -> None:
    assert parse_document('{"a": 1}\n\n{"a": 2}\n', "mem0") == [{"a": 1}, {"a": 2}]
    with pytest.raises(InvalidInput) as caught:
        parse_document('{"a": 1}\n{"a": \n', "mem0")
    assert caught.value.field == "line 2"
    with pytest.raises(InvalidInput, match="empty"):
        parse_document("  \n", "OMS")


def test_mem0_records_become_lines_and_each_refusal_names_record_and_field() -> None:
    text = json.dumps(
        [
            {"id": "mem-42", "memory": "Likes jazz", "user_id": "u", "categories": ["music"]},
            {"id": 7, "memory": "x", "user_id": "u"},
            {"memory": "Has a cat", "user_id": "u", "metadata": "pets"},
            {"memory": "Speaks Portuguese", "user_id": "u", "expiration_date": "2026-13-01"},
            {"memory": "Forever", "user_id": "u", "expiration_date": "9999-12-31"},
            "just text",
        ]
    )
    records = dict(mem0.read(text))
    first = records[1]
    assert isinstance(first, dict)
    assert first["id"] == str(uuid.uuid5(mem0.IDS, "mem-42"))  # stable: the same record, the same id
    assert first["category"] == "fact" and first["metadata"]["mem0"] == {"id": "mem-42", "categories": ["music"]}
    ImportLine.model_validate(first)
    assert records[2] == "record 2: id: a string was expected, not int"
    assert records[3] == "record 3: metadata: an object was expected, not str"
    assert isinstance(records[4], str) and "expiration_date" in records[4]
    assert isinstance(records[5], str) and "out of range" in records[5]
    assert records[6] == "record 6: not an object (str)"


def test_mem0_export_leaves_out_what_is_not_current_and_writes_mem0s_hash() -> None:
    now = dt.datetime(2025, 1, 1, tzinfo=UTC)
    live = ImportLine(user_id="u", content="Likes jazz", id=uuid.uuid4(), created_at=now, updated_at=now)
    old = ImportLine(
        user_id="u", content="Likes rock", id=uuid.uuid4(), created_at=now, superseded_at=now, superseded_by=live.id
    )
    document, left = mem0.write([live, old])
    assert left == 1
    (record,) = document["results"]
    assert record["memory"] == "Likes jazz" and record["hash"] == hashlib.md5(b"Likes jazz").hexdigest()
    assert len(record["hash"]) == 32 and record["categories"] == ["fact"]


def _ours() -> list[ImportLine]:
    a = uuid.uuid4()
    b = uuid.uuid4()
    at = dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    return [
        ImportLine(
            user_id="u", id=a, content="Lives in Lisbon", category="identity", project_id="home", created_at=at,
            valid_from=dt.datetime(2023, 1, 1, tzinfo=UTC), superseded_at=at + dt.timedelta(days=30),
            superseded_by=b, valid_until=dt.datetime(2024, 5, 20, tzinfo=UTC), source="api",
            metadata={"k": ["v", 1]},
        ),
        ImportLine(user_id="u", id=b, content="Lives in Porto", created_at=at, is_evergreen=True, source="ingest"),
    ]  # fmt: skip


def test_ours_to_oms_grains_and_back_is_the_same_memories() -> None:
    lines = _ours()
    grains = list(oms.write(lines))
    lisbon = grains[0]
    assert (lisbon["subject"], lisbon["relation"], lisbon["object"]) == ("u", "identity", "Lives in Lisbon")
    assert lisbon["valid_from"] == 1672531200000 and lisbon["valid_to"] == 1716163200000
    assert lisbon["system_valid_to"] == int((lines[0].superseded_at or dt.datetime.min).timestamp() * 1000)
    assert grains[0]["source_type"] == "api" and grains[1]["source_type"] == "ingest"
    assert "valid_to" not in grains[1]  # nulls are omitted
    text = "\n".join(json.dumps(g) for g in grains)
    back = [ImportLine.model_validate(line) for _, line in oms.read(text)]
    fields = ("id", "content", "category", "project_id", "created_at", "valid_from", "valid_until",
              "superseded_at", "superseded_by", "source", "metadata", "is_evergreen")  # fmt: skip
    for before, after in zip(lines, back, strict=True):
        assert {f: getattr(after, f) for f in fields} == {f: getattr(before, f) for f in fields}


def test_foreign_grains_compacted_or_not_and_the_types_that_hold_no_text() -> None:
    grains = [
        {"t": "fact", "s": "Alice", "r": "works_at", "o": "Acme", "ca": 1737000000000, "user": "alice"},
        {"type": "episode", "content": "Asked about flights", "created_at": 1737000000000},
        {"type": "goal", "description": "x", "created_at": 1737000000000},
        {"type": "fact", "subject": "a", "relation": "b", "object": "c", "valid_to": True},
        {"type": "fact", "subject": "a", "relation": "b", "object": "c", "context": {"k": 1}},
        {"type": "fact", "subject": "a", "relation": "b", "object": "c", "valid_from": 10**20},
    ]
    records = dict(oms.read("\n".join(json.dumps(g) for g in grains), user_id="fallback"))
    fact = records[1]
    assert isinstance(fact, dict) and fact["content"] == "Alice works at Acme" and fact["user_id"] == "alice"
    assert fact["created_at"].startswith("2025-01-16T04:00:00")
    episode = records[2]
    assert isinstance(episode, dict) and episode["user_id"] == "fallback" and episode["source"] == "oms"
    assert records[3] == "record 3: type: a goal grain holds no memory text (fact and episode grains are imported)"
    assert isinstance(records[4], str) and "valid_to" in records[4]
    assert isinstance(records[5], str) and "context" in records[5]
    assert records[6] == f"record 6: valid_from: {10**20} is out of range for a time"
    # The id is the grain's: reading the same grain again gives the same line.
    assert dict(oms.read(json.dumps(grains[0])))[1] == fact


def _node(node_id: str, parent: str | None, children: list[str], role: str, text: str, at: float) -> dict:  # type: ignore[type-arg]
    content = {"content_type": "text", "parts": [text]}
    message = {"author": {"role": role}, "content": content, "create_time": at}
    return {"id": node_id, "message": message, "parent": parent, "children": children}


def test_a_chatgpt_conversation_is_its_shown_branch_cut_into_extraction_windows() -> None:
    mapping: dict[str, dict] = {"r": {"id": "r", "message": None, "parent": None, "children": ["m0"]}}  # type: ignore[type-arg]
    parent = "r"
    for i in range(5):
        role = "user" if i % 2 == 0 else "assistant"
        mapping[f"m{i}"] = _node(f"m{i}", parent, [f"m{i + 1}"] if i < 4 else [], role, f"turn {i}", 1700000000 + i)
        parent = f"m{i}"
    mapping["m1"]["children"].append("gone")
    mapping["gone"] = _node("gone", "m1", [], "user", "an edited-away turn", 1700000099)
    conversation = {"id": "c1", "mapping": mapping, "current_node": "m4", "update_time": 1700000100}
    ((number, messages),) = list(chat.read(json.dumps([conversation]), user_id="u", window=2))
    assert number == 1 and isinstance(messages, list)
    assert [m["conversation_id"] for m in messages] == ["c1#1", "c1#2", "c1#3"]
    assert [t["content"] for m in messages for t in m["messages"]] == [f"turn {i}" for i in range(5)]
    assert messages[0]["ended_at"] == dt.datetime.fromtimestamp(1700000001, UTC).isoformat()


def test_a_plain_list_of_messages_is_one_conversation_and_bad_ones_are_named() -> None:
    plain = [{"role": "system", "content": "be nice"}, {"role": "user", "content": "I live in Oslo"}]
    ((_, messages),) = list(chat.read(json.dumps(plain), user_id="u", window=10))
    assert isinstance(messages, list) and messages[0]["messages"] == [{"role": "user", "content": "I live in Oslo"}]
    assert "ended_at" not in messages[0]  # no time in the file: extraction's own
    bad = [{"messages": [{"role": "user", "content": 3}]}, {"messages": []}]
    assert [r for _, r in chat.read(json.dumps(bad), user_id="u", window=10)] == [
        "conversation 1: messages[0].content: a string was expected",
        "conversation 2: no user or assistant text in it",
    ]
