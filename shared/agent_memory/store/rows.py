"""The records the store writes and reads back besides the wire models: a memory ready to store, and
a stored memory as an extractor is shown it. Plain dataclasses: the steps build them, the store runs them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class MemoryRow:
    """A memory ready to store: normalised, hashed and embedded."""

    user_id: str
    project_id: str | None
    content: str
    content_hash: bytes
    category: str
    embedding: np.ndarray
    source: str | None = None
    is_evergreen: bool = False
    created_at: dt.datetime | None = None
    observed_at: dt.datetime | None = None  # when the fact was (re)stated; drives updated_at
    valid_from: dt.datetime | None = None  # when the fact became true (default: when it was stated)
    expires_at: dt.datetime | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    injection: tuple[str, ...] = ()  # why it looks like it carries instructions (agent_memory.poison)
    # What a restored (exported) memory keeps: see agent_memory.store.restore.
    id: uuid.UUID | None = None
    updated_at: dt.datetime | None = None
    superseded_at: dt.datetime | None = None
    superseded_by: uuid.UUID | None = None
    write_id: uuid.UUID | None = None
    valid_until: dt.datetime | None = None

    @property
    def true_from(self) -> dt.datetime | None:
        """When the fact became true as the store will record it (None: now)."""
        return self.valid_from or self.created_at or self.observed_at


@dataclasses.dataclass(frozen=True)
class ExistingMemory:
    """A stored memory shown to an LLM extractor under a short handle ("m1"), never its id."""

    handle: str
    id: uuid.UUID
    content: str
    category: str
    project_id: str | None
    embedding: np.ndarray  # unit length: cosine similarity is a dot product
