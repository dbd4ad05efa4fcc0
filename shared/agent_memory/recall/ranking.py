"""How recall orders its candidates: each leg's positions (with deterministic tie-breaks), fusion,
time decay, the dates a query names, MMR. No I/O; the maths is in :mod:`.scoring`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from agent_memory.config import FusionMode, Settings
from agent_memory.recall import dates, scoring
from agent_memory.recall.candidates import Candidate

Legs = Literal["hybrid", "vector", "text"]


@dataclass(frozen=True)
class RecallOptions:
    """How to rank: from the settings (:meth:`from_settings`); the benchmarks vary them (:meth:`but`)."""

    fusion: FusionMode
    vector_weight: float
    text_weight: float
    rrf_k: int
    half_life_days: float
    decay_floor: float
    mmr_lambda: float
    overfetch: int
    date_boost: float
    legs: Legs = "hybrid"
    decay: bool = True
    mmr: bool = True
    include_inactive: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> RecallOptions:
        return cls(
            fusion=settings.fusion,
            vector_weight=settings.vector_weight,
            text_weight=settings.text_weight,
            rrf_k=settings.rrf_k,
            half_life_days=settings.half_life_days,
            decay_floor=settings.decay_floor,
            mmr_lambda=settings.mmr_lambda,
            overfetch=settings.overfetch,
            date_boost=settings.date_boost,
        )

    def but(self, **changes: Any) -> RecallOptions:
        return replace(self, **changes)


@dataclass(frozen=True)
class LegPositions:
    """Candidates in a stable order, with their 1-based position in each leg (None: not in it)."""

    candidates: list[Candidate]
    vector_rank: list[int | None]
    text_position: list[int | None]


def leg_positions(candidates: Sequence[Candidate]) -> LegPositions:
    # Ties (common in ts_rank_cd) go to the more recently stated fact, then by content: never by
    # the random ids, so the same memories rank the same in every database.
    vector_order = sorted((c for c in candidates if c.in_vector), key=lambda c: (c.distance, c.content))
    text_order = sorted(
        (c for c in candidates if c.in_text), key=lambda c: (-c.text_rank, -c.updated_at.timestamp(), c.content)
    )
    vector_pos = {c.id: i + 1 for i, c in enumerate(vector_order)}
    text_pos = {c.id: i + 1 for i, c in enumerate(text_order)}
    # A stable order (SQL returns the union in no particular order) keeps ties reproducible.
    last = len(candidates) + 1
    ordered = sorted(candidates, key=lambda c: (vector_pos.get(c.id, last), text_pos.get(c.id, last), c.content))
    return LegPositions(ordered, [vector_pos.get(c.id) for c in ordered], [text_pos.get(c.id) for c in ordered])


def rank_candidates(
    candidates: Sequence[Candidate],
    options: RecallOptions,
    *,
    limit: int,
    now: dt.datetime,
    query: str = "",
) -> list[tuple[Candidate, float]]:
    """Fuse the legs, decay by age, boost what the query dates, diversify with MMR;
    (candidate, final score) best first."""
    legs = leg_positions(candidates)
    keep = list(range(len(legs.candidates)))
    if options.legs == "vector":
        keep = [i for i in keep if legs.vector_rank[i] is not None]
    elif options.legs == "text":
        keep = [i for i in keep if legs.text_position[i] is not None]
    if not keep:
        return []
    chosen = [legs.candidates[i] for i in keep]
    similarity = [1.0 - c.distance for c in chosen]
    if options.legs == "vector":
        relevance = np.clip(np.asarray(similarity, dtype=np.float64), 0.0, 1.0)
    elif options.legs == "text":
        relevance = scoring.fuse_weighted(similarity, [c.text_rank for c in chosen], vector_weight=0.0, text_weight=1.0)
    elif options.fusion == "rrf":
        relevance = scoring.fuse_rrf(
            [legs.vector_rank[i] for i in keep], [legs.text_position[i] for i in keep], k=options.rrf_k
        )
    else:
        relevance = scoring.fuse_weighted(
            similarity,
            [c.text_rank for c in chosen],
            vector_weight=options.vector_weight,
            text_weight=options.text_weight,
        )
    dated = [False] * len(chosen)
    if options.date_boost > 0 and query:
        windows = dates.query_time_windows(query, now)
        if windows:
            dated = dates.in_any_window([c.created_at for c in chosen], windows)
    if options.decay:
        relevance = scoring.apply_time_decay(
            relevance,
            [c.updated_at for c in chosen],
            # Evergreen memories, and those from the time the query asks about, keep their score.
            [c.is_evergreen or d for c, d in zip(chosen, dated, strict=True)],
            now=now,
            half_life_days=options.half_life_days,
            floor=options.decay_floor,
        )
    if any(dated):
        relevance = relevance + options.date_boost * np.asarray(dated, dtype=np.float64)
    if options.mmr:
        order = scoring.mmr_select(
            relevance, np.vstack([c.embedding for c in chosen]), lam=options.mmr_lambda, limit=limit
        )
    else:
        order = [int(i) for i in np.argsort(-relevance, kind="stable")[:limit]]
    return [(chosen[i], float(relevance[i])) for i in order]
