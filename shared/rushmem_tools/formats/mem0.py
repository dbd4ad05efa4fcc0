"""mem0's memories, as its ``get_all`` returns them, to import lines and back.

mem0 OSS (``Memory.get_all``) answers ``{"results": [{"id", "memory", "hash", "metadata",
"created_at", "updated_at", "user_id", "agent_id", "run_id"}]}``; the platform
(``MemoryClient.get_all``) the same records in pages (``{"count", "next", "results"}``) or a bare
list, with ``categories``, ``app_id`` and ``expiration_date`` too. Either, saved as JSON (or JSON
Lines of records), is an import file. The platform's schema-driven ``create_memory_export`` writes
a shape its caller chooses, so it has no reader here: use ``get_all`` for a migration.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from rushmem_contract.models import ImportLine
from rushmem_tools.formats import Record, Refused, each, parse_document, records_of, required_text, text_field

SOURCE = "mem0"
PROVENANCE_KEY = "mem0"  # metadata key holding what mem0 said of the record (its id, hash, scope)
IDS = uuid.UUID("0b9c7a52-6f3e-4d1a-8e25-3c4b5a697d80")  # the uuid5 namespace of ids made from mem0's
_SCOPE = ("agent_id", "run_id", "app_id", "actor_id", "role")
# mem0's platform categories that say what ours say; the rest are facts (the originals are kept).
CATEGORIES = {
    "user_preferences": "preference",
    "personal_details": "identity",
    "professional_details": "identity",
    "family": "identity",
}


def read(text: str, *, user_id: str | None = None, project_id: str | None = None) -> Iterator[Record]:
    """Each mem0 record as an import line (or why not). ``user_id``: the owner of records that
    name none (agent- or run-scoped memories); a record's own user_id wins."""
    records = records_of(parse_document(text, "mem0"), ("results", "memories"), "mem0")
    return each(records, lambda record: _line(record, user_id, project_id))


def _line(record: dict[str, Any], user_id: str | None, project_id: str | None) -> dict[str, Any]:
    content = required_text(record, "memory")
    owner = text_field(record, "user_id") or user_id
    if owner is None:
        raise Refused("user_id: missing (the record has no user_id: pass --user to name its owner)")
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise Refused(f"metadata: an object was expected, not {type(metadata).__name__}")
    categories = record.get("categories") or []
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise Refused("categories: a list of strings was expected")
    mem0_id = record.get("id")
    if mem0_id is not None and not isinstance(mem0_id, str):
        raise Refused(f"id: a string was expected, not {type(mem0_id).__name__}")
    provenance = {"id": mem0_id, "hash": record.get("hash"), "categories": categories or None}
    provenance.update({key: record.get(key) for key in _SCOPE})
    line: dict[str, Any] = {
        "user_id": owner,
        "content": content,
        "category": next((CATEGORIES[c] for c in categories if c in CATEGORIES), "fact"),
        "source": SOURCE,
        "metadata": {**metadata, PROVENANCE_KEY: {k: v for k, v in provenance.items() if v is not None}},
    }
    if mem0_id is not None:
        # mem0's id (a UUID), or one made from it: a second import of the same file stores nothing twice.
        line["id"] = mem0_id if _is_uuid(mem0_id) else str(uuid.uuid5(IDS, mem0_id))
    for name in ("created_at", "updated_at"):
        if record.get(name) is not None:
            line[name] = record[name]  # the import line's validation names a time that is not one
    if project_id is not None:
        line["project_id"] = project_id
    expiry = record.get("expiration_date")
    if expiry is not None:
        line["expires_at"] = _end_of(expiry)
    return line


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _end_of(value: Any) -> str:
    """mem0's expiration_date is a day ("2026-03-01"): the memory expires when that day ends (UTC)."""
    if not isinstance(value, str):
        raise Refused("expiration_date: a date (YYYY-MM-DD) was expected")
    try:
        day = dt.date.fromisoformat(value[:10])
    except ValueError:
        raise Refused(f"expiration_date: {value!r} is not a date (YYYY-MM-DD)") from None
    if day == dt.date.max:
        raise Refused(f"expiration_date: {value!r} is out of range (its end is past the last day a time can hold)")
    return dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.UTC).isoformat()


def write(lines: Iterable[ImportLine]) -> tuple[dict[str, Any], int]:
    """Export lines as mem0's ``get_all`` answer (``{"results": [...]}``), and how many were left
    out: mem0 holds what is current only, so superseded and ended memories stay behind."""
    results: list[dict[str, Any]] = []
    left = 0
    now = dt.datetime.now(dt.UTC)
    for line in lines:
        ended = line.valid_until is not None and line.valid_until <= now
        if line.superseded_by is not None or line.superseded_at is not None or ended:
            left += 1
            continue
        metadata = dict(line.metadata)
        provenance = metadata.pop(PROVENANCE_KEY, None)
        came = provenance if isinstance(provenance, dict) else {}
        record: dict[str, Any] = {
            "id": str(line.id) if line.id else None,
            "memory": line.content,
            "hash": hashlib.md5(line.content.encode()).hexdigest(),  # noqa: S324 - mem0's own content hash
            "metadata": metadata or None,
            "categories": came.get("categories") or [line.category],
            "user_id": line.user_id,
            "created_at": line.created_at.isoformat() if line.created_at else None,
            "updated_at": line.updated_at.isoformat() if line.updated_at else None,
        }
        record.update({key: came[key] for key in _SCOPE if key in came})
        if line.expires_at is not None:
            # The last day it holds (an expiry at midnight is the end of the day before).
            last = line.expires_at.astimezone(dt.UTC) - dt.timedelta(microseconds=1)
            record["expiration_date"] = last.date().isoformat()
        results.append(record)
    return {"results": results}, left
