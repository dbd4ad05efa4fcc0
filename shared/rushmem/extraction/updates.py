"""Update on write: what an LLM's "restates" and "replaces" references may do, and what not.

The model saw the user's related memories under handles ("m1".."m8"); here the handles are
mapped back to memory ids and checked (:func:`_check`: a reference the guards refuse is logged and
the fact kept as a new memory; docs/how-it-works.md, Update on write). Several restatements of one
memory are fine. Scope needs no check here: only memories the conversation's scope can see were
shown; the store checks again, in the write transaction, that each target is still live and in scope.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Sequence

import numpy as np

from rushmem.extraction.records import ExtractedMemory, fact_reference
from rushmem.records import ExistingMemory

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class FactUpdate:
    """What one extracted fact does to existing memories (ids, never handles)."""

    restates: uuid.UUID | None = None
    replaces: tuple[uuid.UUID, ...] = ()
    # A fact replacing a user-wide memory is itself user-wide, even from a project's conversation.
    user_wide: bool = False
    ignored: int = 0  # references dropped by the guards
    depends_on: tuple[uuid.UUID, ...] = ()  # existing memories the fact follows from
    depends_within: tuple[int, ...] = ()  # other facts of the same answer it follows from (indexes)


def resolve_updates(
    facts: Sequence[ExtractedMemory],
    vectors: Sequence[np.ndarray],
    shown: Sequence[ExistingMemory],
    *,
    min_similarity: float,
) -> list[FactUpdate]:
    """One FactUpdate per fact (same order), with the model's references checked."""
    by_handle = {m.handle: m for m in shown}
    kept = {fact_reference(f.content): i for i, f in enumerate(facts)}
    claims = _Claims()
    updates: list[FactUpdate] = []
    for index, (fact, vector) in enumerate(zip(facts, vectors, strict=True)):
        refused: list[tuple[str, str, str]] = []  # (kind, handle, why)
        restates: ExistingMemory | None = None
        if fact.restates:
            restates, why = _check(by_handle.get(fact.restates), "restates", vector, min_similarity, claims)
            if why:
                refused.append(("restates", fact.restates, why))
        replaces: list[ExistingMemory] = []
        for handle in fact.replaces:
            if restates is not None and handle == restates.handle:
                continue  # "the same as m1, and replaces m1": the same as m1
            target, why = _check(by_handle.get(handle), "replaces", vector, min_similarity, claims)
            if why:
                refused.append(("replaces", handle, why))
            elif target is not None and target not in replaces:
                replaces.append(target)
        for kind, handle, why in refused:
            logger.warning("extracted item %d: %s %r ignored: it %s; the fact is kept as new", index, kind, handle, why)
        if restates is not None:
            claims.restated.add(restates.id)
        claims.replaced.update(t.id for t in replaces)
        depends_on, depends_within = _dependencies(index, fact.depends_on, by_handle, kept)
        updates.append(
            FactUpdate(
                restates=restates.id if restates else None,
                replaces=tuple(t.id for t in replaces),
                user_wide=any(t.project_id is None for t in replaces),
                ignored=len(refused),
                depends_on=depends_on,
                depends_within=depends_within,
            )
        )
    return updates


def _dependencies(
    index: int, references: Sequence[str], by_handle: dict[str, ExistingMemory], facts: dict[str, int]
) -> tuple[tuple[uuid.UUID, ...], tuple[int, ...]]:
    """A fact's ``depends_on`` mapped: shown memories by handle, other facts of the answer by their
    reference (:func:`~rushmem.extraction.records.fact_reference`) to their index here. No
    similarity guard: what a fact follows from is another subject (a gym and a home city). A
    reference to no shown memory, no fact kept or the fact itself is logged and dropped (the fact
    is kept)."""
    existing: list[uuid.UUID] = []
    others: list[int] = []
    for reference in references:
        shown = by_handle.get(reference)
        if shown is not None:
            existing.append(shown.id)
        elif facts.get(reference, index) != index:
            others.append(facts[reference])
        else:
            logger.warning("extracted item %d: depends_on %r ignored: no other fact or shown memory", index, reference)
    return tuple(dict.fromkeys(existing)), tuple(dict.fromkeys(others))


@dataclasses.dataclass
class _Claims:
    """Memories already restated or replaced by earlier facts of the same answer."""

    restated: set[uuid.UUID] = dataclasses.field(default_factory=set)
    replaced: set[uuid.UUID] = dataclasses.field(default_factory=set)


def _check(
    target: ExistingMemory | None, kind: str, vector: np.ndarray, min_similarity: float, claims: _Claims
) -> tuple[ExistingMemory | None, str | None]:
    """(the target, None) when the reference may stand, else (None, why not)."""
    if target is None:
        return None, "names no memory that was shown"
    similarity = float(np.dot(vector, target.embedding))
    if similarity < min_similarity:
        return None, f"is about something else (similarity {similarity:.2f} < {min_similarity:.2f})"
    if target.id in claims.replaced or (kind == "replaces" and target.id in claims.restated):
        return None, "points at a memory another fact already restates or replaces"
    return target, None
