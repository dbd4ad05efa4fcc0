"""From validated memories to rows ready to store: checked against the configured limits,
each distinct fact embedded once, folded by its identity (user, project, content hash)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np

from rushmem import poison
from rushmem.config import Settings
from rushmem.embeddings.base import Embedder
from rushmem.ingest.redaction import REDACTED_KEY
from rushmem.records import MemoryRow, WriteOutcome
from rushmem_contract.errors import InputTooLarge, InvalidInput
from rushmem_contract.inputs import JsonValueError, inspect_json
from rushmem_contract.models import FactOutcome, NewMemory, content_hash, fact_key, metadata_chars, too_large

_REFRESHED_AS = {"refreshed": "exact_duplicate", "near_duplicate": "near_duplicate", "restated": "restated"}


def fact_outcome(outcome: WriteOutcome, row: MemoryRow) -> FactOutcome:
    """What a write did with one fact (``row``, as stored), as every door answers it."""
    created = outcome.action == "created"
    return FactOutcome(
        id=outcome.id,
        action="created" if created else "refreshed",
        content=row.content,
        refreshed_as=None if created else _REFRESHED_AS.get(outcome.action, "exact_duplicate"),  # type: ignore[arg-type]
        superseded=list(outcome.superseded),
        superseded_by=outcome.superseded_by,
    )


def check_new_memories(settings: Settings, memories: Sequence[NewMemory], field: str = "memories") -> None:
    """The configured limits (the models hold only the wire format's ceilings)."""
    if not memories:
        raise InvalidInput("no memories given", field=field)
    if len(memories) > settings.max_memories_per_request:
        raise too_large(field, len(memories), settings.max_memories_per_request, "items")
    check_lengths(settings, memories, field)


def check_lengths(settings: Settings, memories: Sequence[NewMemory], field: str) -> None:
    for i, memory in enumerate(memories):
        if len(memory.content) > settings.max_memory_chars:
            raise too_large(f"{field}[{i}].content", len(memory.content), settings.max_memory_chars)
        if memory.metadata:
            check_metadata(settings, memory.metadata, f"{field}[{i}].metadata")


def check_metadata(settings: Settings, metadata: dict[str, Any], field: str) -> None:
    """The configured bounds of a memory's metadata (the model checked it holds only JSON).

    What redaction records (``pii_redacted``) is the service's, not the caller's: not counted,
    so that a memory redacted at its limits can still be exported and imported again."""
    if REDACTED_KEY in metadata:
        metadata = {k: v for k, v in metadata.items() if k != REDACTED_KEY}
    try:
        shape = inspect_json(metadata, max_depth=settings.max_metadata_depth)
    except JsonValueError as exc:
        raise InputTooLarge(f"metadata {exc}", field=field) from None
    if shape.keys > settings.max_metadata_keys:
        raise InputTooLarge(f"metadata has {shape.keys} keys; the limit is {settings.max_metadata_keys}", field=field)
    chars = metadata_chars(metadata)
    if chars > settings.max_metadata_chars:
        raise too_large(field, chars, settings.max_metadata_chars, "characters as JSON")


def embed_unique(embedder: Embedder, texts: Sequence[str]) -> list[np.ndarray]:
    """One vector per text, in one embedding batch; texts that state the same fact share one vector."""
    keys = [fact_key(t) for t in texts]
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    vectors = embedder.embed([texts[i] for i in first.values()])
    by_key = dict(zip(first, vectors, strict=True))
    return [by_key[key] for key in keys]


def build_rows(
    user_ids: Sequence[str],
    memories: Sequence[NewMemory],
    vectors: Sequence[np.ndarray],
    *,
    project_id: str | None,
    source: str | None,
    observed_at: dt.datetime | None,
    user_wide: Sequence[bool] | None = None,
) -> tuple[list[MemoryRow], list[int]]:
    """The rows to store (one per distinct fact and scope: the first statement wins) and, per
    input memory, the index of its row. A memory's own project wins over ``project_id``;
    ``user_wide`` memories ignore ``project_id``."""
    rows: list[MemoryRow] = []
    index_of: dict[tuple[str, str | None, bytes], int] = {}
    positions: list[int] = []
    for i, (user_id, memory, vector) in enumerate(zip(user_ids, memories, vectors, strict=True)):
        scope_project = memory.project_id or (None if user_wide and user_wide[i] else project_id)
        digest = content_hash(memory.content)  # content is normalised by its model
        key = (user_id, scope_project, digest)
        if key not in index_of:
            index_of[key] = len(rows)
            rows.append(
                MemoryRow(
                    user_id=user_id,
                    project_id=scope_project,
                    content=memory.content,
                    content_hash=digest,
                    category=memory.category,
                    embedding=vector,
                    source=source,
                    is_evergreen=memory.is_evergreen,
                    created_at=memory.created_at,
                    observed_at=observed_at or memory.created_at,
                    valid_from=memory.valid_from,
                    expires_at=memory.expires_at,
                    metadata=memory.metadata,
                    # Marked here, once, for every write path (add, ingest, import, extraction).
                    injection=tuple(poison.reasons(memory.content)),
                )
            )
        positions.append(index_of[key])
    return rows, positions
