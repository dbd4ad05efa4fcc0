"""What the hostile tests check of the store after any request, whatever the door: nothing is
stored that a reader could not see (every text in its visible form, ids printable) and, with
redaction on, no value a detector finds in what a reader sees. Read as the owner (no row-level
security), so every user's rows are checked."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from typing import Any

import psycopg

from rushmem.privacy import PiiPolicy, redact_many
from rushmem_contract.inputs import visible_text
from rushmem_contract.models import normalize_content


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string of a JSON value, keys included, with where it is."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, child in value.items():
            yield f"{path}.{key}(key)", key
            yield from _strings(child, f"{path}.{key}")
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _strings(child, f"{path}[{i}]")


def _printable_id(value: str | None) -> bool:
    return value is None or not any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in value)


def unreadable_rows(database_url: str, *, pii: str | None = None) -> list[str]:
    """Every place in the store where what is stored differs from what a reader sees, or (with
    ``pii``, a policy such as "redact") where personal data a detector finds was kept."""
    problems: list[str] = []
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT 'memory', id::text, user_id, project_id, source, content, metadata FROM user_memories "
            "UNION ALL SELECT 'event', memory_id::text, user_id, project_id, source, content, detail "
            "FROM memory_events"
        ).fetchall()
        receipts = conn.execute("SELECT id::text, requested_by FROM erasure_receipts").fetchall()
    texts: list[tuple[str, str]] = []
    for kind, row_id, user_id, project_id, source, content, metadata in rows:
        where = f"{kind} {row_id}"
        for name, value in (("user_id", user_id), ("project_id", project_id), ("source", source)):
            if not _printable_id(value):
                problems.append(f"{where}: {name} {value!r} holds characters a reader does not see")
        # An 'updated' event that left the text as it was keeps none (issue 46: readers take it
        # from the event before).
        if content is not None:
            if content != normalize_content(content):
                problems.append(f"{where}: content {content!r} is not in its visible form")
            texts.append((f"{where}: content", content))
        for path, text in _strings(metadata or {}):
            if text != visible_text(text):
                problems.append(f"{where}: metadata{path} {text!r} is not in its visible form")
            texts.append((f"{where}: metadata{path}", text))
    for receipt_id, requested_by in receipts:
        if not _printable_id(requested_by):
            problems.append(f"receipt {receipt_id}: requested_by {requested_by!r} is not printable")
    if pii is not None:
        policy = PiiPolicy.parse(pii)
        found = redact_many([text for _, text in texts], policy)
        for (where, text), result in zip(texts, found, strict=True):
            if result.changed or result.dropped:
                problems.append(f"{where}: {text!r} still holds {sorted(result.removed)}")
    return problems


def assert_store_readable(database_url: str, *, pii: str | None = None) -> None:
    problems = unreadable_rows(database_url, pii=pii)
    assert not problems, json.dumps(problems, indent=1, ensure_ascii=True)
