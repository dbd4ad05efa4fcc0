"""The records the steps and the store share besides the wire models: a memory ready to store, a
stored memory as an extractor or consolidation is shown it, a recall candidate, what a write did
and the updates an ingest message makes. Plain dataclasses: the steps build and read them, the store
runs and returns them; neither side's code is needed to use them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt


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
    injection: tuple[str, ...] = ()  # why it looks like it carries instructions (rushmem.poison)
    # What a restored (exported) memory keeps: see rushmem.store.memories.restore.
    id: uuid.UUID | None = None
    updated_at: dt.datetime | None = None
    superseded_at: dt.datetime | None = None
    superseded_by: uuid.UUID | None = None
    write_id: uuid.UUID | None = None
    valid_until: dt.datetime | None = None
    depends_on: tuple[uuid.UUID, ...] = ()
    stale_at: dt.datetime | None = None
    stale_because: uuid.UUID | None = None
    stale_reason: str | None = None

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


@dataclasses.dataclass(frozen=True)
class LiveMemory:
    id: uuid.UUID
    project_id: str | None
    content: str
    created_at: dt.datetime
    embedding: np.ndarray | None = None  # unit length: cosine similarity is a dot product
    valid_from: dt.datetime | None = None  # when the fact became true (None: when it was stated)

    @property
    def said(self) -> tuple[dt.datetime, dt.datetime]:
        """Which of two statements came first: valid time, then when each was stated."""
        return (self.valid_from or self.created_at, self.created_at)


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """A live memory of the user that one leg or both found, with what ranking needs."""

    id: uuid.UUID
    user_id: str
    project_id: str | None
    content: str
    category: str
    source: str | None
    is_evergreen: bool
    created_at: dt.datetime
    updated_at: dt.datetime
    expires_at: dt.datetime | None
    superseded_by: uuid.UUID | None
    superseded_at: dt.datetime | None
    metadata: dict[str, Any]
    embedding: npt.NDArray[np.float32]  # unit length
    distance: float  # cosine distance to the query, 0 = same direction
    text_rank: float  # ts_rank_cd, 0 when the text does not match
    in_vector: bool  # among the vector leg's k nearest
    in_text: bool  # among the full-text leg's k best
    injection: tuple[str, ...] = ()  # why it looks like it carries instructions (rushmem.poison)
    in_date: bool = False  # found by the date leg (stated inside a window the query names)
    # The embedding is its sign bits as a unit vector (+-1/sqrt(d)), not the vector itself: what the
    # RDS Data API path brings back, a 1 MiB answer having no room for 150+ full 1024-d vectors.
    sign_code: bool = False
    valid_from: dt.datetime | None = None  # when the fact became true (None: when it was stated)
    valid_until: dt.datetime | None = None  # when it stopped being true (set with superseded_by)
    # Stale: a memory it depends on was superseded or deleted (which one, and which of the two).
    stale_at: dt.datetime | None = None
    stale_because: uuid.UUID | None = None
    stale_reason: str | None = None


@dataclasses.dataclass(frozen=True)
class NamedRow:
    """What the store says of a memory an explained recall names
    (:func:`rushmem.store.memories.named.named_memories`)."""

    id: uuid.UUID
    project_id: str | None
    created_at: dt.datetime
    expires_at: dt.datetime | None
    superseded_at: dt.datetime | None
    valid_from: dt.datetime
    valid_until: dt.datetime | None
    distance: float | None  # None: a write waiting for review (no memory yet)
    text_match: bool | None
    in_filters: bool
    in_scope: bool
    vector_position: int | None
    pending: bool = False

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> NamedRow:
        return cls(**{f.name: row[f.name] for f in dataclasses.fields(cls) if f.name in row})


Window = tuple[dt.datetime, dt.datetime]


@dataclasses.dataclass(frozen=True)
class DependsOn:
    """What a write's rows follow from (by row index): memories the user has, each with the request
    field that named it (for the refusal's ``field``), and earlier rows of the same write (an
    extraction's facts that follow from one another)."""

    named: Mapping[int, Sequence[tuple[uuid.UUID, str]]] = dataclasses.field(default_factory=dict)
    within: Mapping[int, Sequence[int]] = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.named) or bool(self.within)


@dataclasses.dataclass(frozen=True)
class WriteOutcome:
    id: uuid.UUID
    action: str  # "created" | "refreshed" | "near_duplicate" | "restated"
    # The memories this one superseded (they stay, closed, in history); and, for a fact older
    # than a stored version of it (valid_from), the memory that supersedes it at once.
    superseded: tuple[uuid.UUID, ...] = ()
    superseded_by: uuid.UUID | None = None


@dataclasses.dataclass(frozen=True)
class Updates:
    """What an ingest message's facts say about existing memories, by row index.

    ``restates``: the row says the same as that memory, which is refreshed instead of storing
    the row. ``replaces``: those memories are superseded by the row's memory. Targets must be
    live and visible from ``project_id`` (the message's scope) when the write runs; the others
    are skipped, and their rows stored as new.
    """

    restates: Mapping[int, uuid.UUID] = dataclasses.field(default_factory=dict)
    replaces: Mapping[int, Sequence[uuid.UUID]] = dataclasses.field(default_factory=dict)
    project_id: str | None = None
    # Rows an LLM extractor already judged (restates, replaces or new): the same-attribute rule
    # does not second-guess it.
    judged: frozenset[int] = frozenset()
    # Corrections inside the message: row -> the later row of the message that supersedes it.
    corrected_by: Mapping[int, int] = dataclasses.field(default_factory=dict)
    # What the rows follow from: existing memories (checked live, like the targets) and earlier rows.
    depends_on: DependsOn = dataclasses.field(default_factory=lambda: DependsOn())

    @property
    def targets(self) -> set[uuid.UUID]:
        named = (t for ids in self.depends_on.named.values() for t, _ in ids)
        return {*self.restates.values(), *(t for ids in self.replaces.values() for t in ids), *named}


@dataclasses.dataclass(frozen=True)
class IngestWrite:
    """What one ingest message wrote: outcomes in row order, (old, new) supersessions, and
    the update targets skipped because they had ended or left the scope meanwhile."""

    outcomes: list[WriteOutcome]
    superseded: list[tuple[uuid.UUID, uuid.UUID]]
    stale: list[uuid.UUID]
    # The run of the server that took the write (see UnflushedWrites).
    server_started: dt.datetime | None = None


@dataclasses.dataclass(frozen=True)
class Neighbour:
    """A live memory near a new row, in the row's scope: what a write reads before it decides."""

    id: uuid.UUID
    content: str
    valid_from: dt.datetime
    similarity: float
    project_id: str | None = None  # another project's only for a user-wide row (updates, never folds)


@dataclasses.dataclass(frozen=True)
class NearMatches:
    """What new rows are to their stored neighbours, by row index: the memory a row restates (it is
    refreshed instead of the row being stored) and the memories whose value a row updates (they are
    superseded by the row's memory once it is stored)."""

    restates: dict[int, uuid.UUID]
    updates: dict[int, list[Neighbour]]


class NeighbourRule(Protocol):
    """The ingest step's rule for new rows and their stored neighbours
    (:class:`rushmem.ingest.neighbours.SameFactRule`): the store reads each row's neighbours at
    least ``floor`` similar (None: reads none) inside the write's transaction, and carries out what
    ``judge`` says of them (nearest first)."""

    @property
    def floor(self) -> float | None: ...

    def judge(
        self, rows: Sequence[MemoryRow], near: Mapping[int, Sequence[Neighbour]], *, judged: Collection[int] = ()
    ) -> NearMatches: ...
