"""Whether a new memory is a fact already stored (fold it: refresh the stored one), a new value of a
stored fact (supersede that one) or a new fact: the write path's rule, from the settings' two
similarity thresholds and the text checks of :mod:`rushmem.ingest.facts`. The store reads each
new row's nearest live memories inside the write's transaction and carries the decision out.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from rushmem.config import Settings
from rushmem.ingest.facts import about_the_user, same_fact, same_statement, switched_value, updated_value
from rushmem.records import MemoryRow, NearMatches, Neighbour


@dataclasses.dataclass(frozen=True)
class SameFactRule:
    """``fold``: a neighbour at least this similar that states the same fact is refreshed instead of
    storing the row (RUSHMEM_NEAR_DUPLICATE_THRESHOLD). ``update``: a neighbour at least this
    similar whose fact the row gives another value is superseded by it (the same-attribute threshold).
    None: that rule is off."""

    fold: float | None = None
    update: float | None = None

    @classmethod
    def from_thresholds(cls, fold: float | None, update: float | None) -> SameFactRule:
        """The rule of two thresholds, one above 1.0 (no similarity reaches it) meaning off."""
        return cls(
            fold if fold is not None and fold <= 1.0 else None,
            update if update is not None and update <= 1.0 else None,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> SameFactRule:
        return cls.from_thresholds(settings.near_duplicate_threshold, settings.same_attribute_threshold)

    @property
    def floor(self) -> float | None:
        thresholds = [t for t in (self.fold, self.update) if t is not None]
        return min(thresholds) if thresholds else None

    def judge(
        self, rows: Sequence[MemoryRow], near: Mapping[int, Sequence[Neighbour]], *, judged: Collection[int] = ()
    ) -> NearMatches:
        """A row restates the first neighbour (nearest first) that is near enough and the same fact
        (or the same statement in another person); otherwise it updates every neighbour near enough
        whose slot it gives another value or whose state it ends (a switch with no slot named: the
        nearest such neighbour only), unless
        an LLM extractor already judged the row (``judged``)."""
        restates: dict[int, uuid.UUID] = {}
        updates: dict[int, list[Neighbour]] = {}
        fold, update, floor = self.fold, self.update, self.floor or 0.0
        for i, neighbours in near.items():
            text = rows[i].content
            # A fact folds only into its own scope's.
            own = [n for n in neighbours if n.project_id == rows[i].project_id]
            same = [
                n
                for n in own
                if (fold is not None and n.similarity >= fold and same_fact(n.content, text))
                # The same statement in another person ("I live in Berlin" / "The user lives in
                # Berlin"): embeddings put the two further apart than a restatement.
                or (fold is not None and n.similarity >= floor and same_statement(n.content, text))
            ]
            if same:
                restates[i] = same[0].id
                continue
            # A user-wide row updates every project's value; a project's row its project's, and a
            # user-wide value only of the user's own state (the rest is resolved in the project's recall).
            seen = [
                n
                for n in neighbours
                if n.project_id == rows[i].project_id
                or rows[i].project_id is None
                or (n.project_id is None and about_the_user(n.content, text))
            ]
            olds = [n for n in seen if update is not None and n.similarity >= update and updated_value(n.content, text)]
            if not olds and update is not None:
                # "I switched to Emacs": one switch ends one thing, the nearest it can end.
                olds = [n for n in seen if n.similarity >= update and switched_value(n.content, text)][:1]
            if olds and i not in judged:
                updates[i] = olds
        return NearMatches(restates, updates)

    def within(self, rows: Sequence[MemoryRow], order: Sequence[tuple[Any, ...]]) -> dict[int, int]:
        """Corrections inside one write (a conversation): per row, the row that supersedes it, the
        first later one (by ``order``: when and where each was said) giving its slot another value
        and at least ``update`` similar, so "is 6" ... "is 7" ... "is 8" stays a chain. Rows in
        scopes that cannot see each other are never paired."""
        if self.update is None or len(rows) < 2:
            return {}
        ranked = sorted(range(len(rows)), key=lambda i: order[i])
        later: dict[int, int] = {}
        for n, i in enumerate(ranked):
            for j in ranked[n + 1 :]:
                a, b = rows[i], rows[j]
                if a.project_id is not None and b.project_id is not None and a.project_id != b.project_id:
                    continue
                if float(np.dot(a.embedding, b.embedding)) < self.update:
                    continue
                if updated_value(a.content, b.content):
                    later[i] = j
                    break
        return later
