"""Consolidation's decisions, without I/O (docs/how-it-works.md, Consolidation): which of one user's
memories are duplicates of which (merged into the older, by :func:`rushmem.ingest.facts.same_fact`),
and which stale facts slipped in beside their update (superseded by the oldest newer memory giving one
slot another value, :func:`rushmem.ingest.facts.updated_value`). A memory is merged at most once per
run, and never into one itself merged away: a chain (a ~ b ~ c where a and c differ) is never
collapsed through its middle; the next run looks again.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Collection, Sequence

import numpy as np
from pydantic import BaseModel

from rushmem.ingest.facts import same_fact, same_statement, updated_value, wording
from rushmem.records import LiveMemory

# Rows compared at once: a block of this many against the whole scope (40 MB at 10,000 memories).
BLOCK = 1024


@dataclasses.dataclass(frozen=True)
class NearPair:
    """Two memories of one scope whose vectors are at least the threshold alike (first < second in
    the order given)."""

    first: uuid.UUID
    second: uuid.UUID
    similarity: float


def near_pairs(live: Sequence[LiveMemory], *, threshold: float, neighbours: int | None = None) -> list[NearPair]:
    """Every pair of ``live`` memories in one scope at least ``threshold`` alike (cosine on their
    unit-length embeddings), each pair once; with ``neighbours``, only each memory's that many
    nearest (a low threshold would otherwise pair most of a large scope)."""
    scopes: dict[str | None, list[LiveMemory]] = {}
    for memory in live:
        if memory.embedding is not None:
            scopes.setdefault(memory.project_id, []).append(memory)
    found: list[NearPair] = []
    for members in scopes.values():
        if len(members) < 2:
            continue
        matrix = np.stack([m.embedding for m in members if m.embedding is not None]).astype(np.float32)
        for start in range(0, len(members), BLOCK):
            similar = matrix[start : start + BLOCK] @ matrix.T
            if neighbours is not None and neighbours + 1 < len(members):
                # Keep each row's nearest (itself included) above the threshold, the rest below it.
                cut = np.partition(similar, -(neighbours + 1), axis=1)[:, -(neighbours + 1)][:, None]
                similar = np.where(similar >= cut, similar, -1.0)
            rows, cols = np.nonzero(similar >= threshold)
            for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
                i = start + r
                if c > i:
                    found.append(NearPair(members[i].id, members[c].id, float(similar[r, c])))
    return found


class ConsolidationReport(BaseModel):
    """What a run did: users looked at, duplicates found (pairs judged the same fact) and merged,
    stale facts superseded, or with review on (RUSHMEM_REVIEW_WRITES) the merges and retirements
    proposed for review instead (new proposals: one waiting already is not counted again),
    whether it went round every user (False: ``max_seconds`` ran out; ``cursor`` is where the next
    run goes on), and the run's write id (in the history of every memory it changed)."""

    users: int = 0
    duplicates_found: int = 0
    merged: int = 0
    superseded: int = 0
    proposed: int = 0
    done: bool = True
    cursor: str | None = None
    write_id: uuid.UUID | None = None

    def summary(self) -> str:
        state = "" if self.done else " (not finished: run it again to go on)"
        return (
            f"consolidate: {self.users} users, {self.duplicates_found} duplicates found, {self.merged} merged, "
            f"{self.superseded} stale facts superseded, {self.proposed} proposed for review{state}"
        )


def plan_merges(
    live: Sequence[LiveMemory],
    pairs: Sequence[NearPair],
    *,
    threshold: float,
    declined: Collection[tuple[uuid.UUID, uuid.UUID]] = (),
) -> tuple[int, list[tuple[uuid.UUID, uuid.UUID]]]:
    """How many of one user's memories duplicate another, and the (duplicate, kept) pairs to merge
    now: the same wording in one scope, or close pairs that :func:`same_fact` accepts; never a
    ``declined`` pair (a reviewer rejected it), which leaves the duplicate free for another.
    ``live`` is oldest first."""
    order = {m.id: i for i, m in enumerate(live)}
    by_id = {m.id: m for m in live}
    found: list[tuple[float, uuid.UUID, uuid.UUID]] = []  # (similarity, newer, older)
    first_of: dict[tuple[str | None, tuple[str, ...]], uuid.UUID] = {}
    for memory in live:
        key = (memory.project_id, wording(memory.content))
        if key in first_of:
            found.append((2.0, memory.id, first_of[key]))  # equal texts before any close pair
        else:
            first_of[key] = memory.id
    for pair in sorted(pairs, key=lambda p: -p.similarity):
        a, b = by_id.get(pair.first), by_id.get(pair.second)
        if a is None or b is None or a.project_id != b.project_id:
            continue
        if pair.similarity < threshold or not (same_fact(a.content, b.content) or same_statement(a.content, b.content)):
            continue
        older, newer = (a, b) if order[a.id] < order[b.id] else (b, a)
        found.append((pair.similarity, newer.id, older.id))
    merges: dict[uuid.UUID, uuid.UUID] = {}
    kept: set[uuid.UUID] = set()
    for _similarity, duplicate, keep in sorted(found, key=lambda f: -f[0]):
        if duplicate in merges or duplicate in kept or keep in merges or (duplicate, keep) in declined:
            continue
        merges[duplicate] = keep
        kept.add(keep)
    return len({f[1] for f in found}), list(merges.items())


def plan_supersessions(
    live: Sequence[LiveMemory],
    pairs: Sequence[NearPair],
    *,
    merged: Sequence[uuid.UUID] = (),
    declined: Collection[tuple[uuid.UUID, uuid.UUID]] = (),
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(stale, newer) pairs among one user's close ``pairs``: the newer memory gives the older one's
    fact another value in one slot. Each stale memory once, by the oldest such newer memory (a
    chain of corrections stays a chain); memories merged away this run take no part, nor pairs said
    at the same instant, nor ``declined`` pairs (a reviewer rejected them). ``live`` is oldest
    first (valid time, then when stated)."""
    order = {m.id: i for i, m in enumerate(live)}
    by_id = {m.id: m for m in live}
    gone = set(merged)
    best: dict[uuid.UUID, uuid.UUID] = {}
    for pair in pairs:
        a, b = by_id.get(pair.first), by_id.get(pair.second)
        if a is None or b is None or a.project_id != b.project_id or a.id in gone or b.id in gone:
            continue
        if a.said == b.said:
            continue  # said at the same instant: nothing tells which is the correction, so both stay
        older, newer = (a, b) if a.said < b.said else (b, a)
        if (older.id, newer.id) in declined or not updated_value(older.content, newer.content):
            continue
        if older.id not in best or order[newer.id] < order[best[older.id]]:
            best[older.id] = newer.id
    return sorted(best.items(), key=lambda p: order[p[0]])
