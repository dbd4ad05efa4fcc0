"""How recall orders its candidates: each leg's positions (with deterministic tie-breaks), fusion,
the entity boost and the hop bonus, an optional reranker's scores, time decay, the dates a query
names, MMR. No I/O of its own (a reranker is passed in); the maths is in :mod:`.scoring`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from agent_memory.config import FusionMode, Settings
from agent_memory.extraction.entities import extract_entities
from agent_memory.recall import dates, scoring
from agent_memory.recall.candidates import Candidate, ExtraLegs, Window

Legs = Literal["hybrid", "vector", "text"]
# Scores of the documents (one each, same order) for the query, or None when the reranker failed
# (the fused order then stands): see agent_memory.rerank.
Rerank = Callable[[str, Sequence[str]], Sequence[float] | None]


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
    # The date leg: memories stated inside a window the query names (0: off).
    date_k: int = 0
    # Read years, seasons and "N ... ago" as windows too (named days and months always are).
    date_ranges: bool = True
    # The entity leg: memories naming a rare entity the query names (0: off); "rare": named by at
    # most entity_cap of the user's memories. entity_boost is added to their relevance.
    entity_k: int = 0
    entity_cap: int = 50
    entity_boost: float = 0.0
    # One hop from the best candidates: a candidate stated at the same instant as one of the
    # hop_seeds best (by fused relevance; written together) or, with hop_entities, sharing a rare
    # entity with it gains hop_boost x that seed's relevance. With hop_k > 0 the candidate query
    # also fetches up to hop_k such neighbours per seed that no other leg found.
    hop_seeds: int = 0
    hop_k: int = 0
    hop_boost: float = 0.0
    hop_entities: bool = False
    # The reranker (when one is configured and rerank is on): the rerank_top_n best fused
    # candidates are scored by it; rerank_weight of their relevance is its (scaled) score.
    rerank: bool = True
    rerank_top_n: int = 30
    rerank_weight: float = 0.7

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
            date_k=settings.date_k,
            entity_k=settings.entity_k,
            entity_cap=settings.entity_cap,
            entity_boost=settings.entity_boost,
            hop_seeds=settings.hop_seeds,
            hop_k=settings.hop_k,
            hop_boost=settings.hop_boost,
            hop_entities=settings.hop_entities,
            rerank_top_n=settings.rerank_top_n,
            rerank_weight=settings.rerank_weight,
        )

    def but(self, **changes: Any) -> RecallOptions:
        return replace(self, **changes)

    def extra_legs(self, query: str, now: dt.datetime) -> ExtraLegs:
        """The optional candidate legs this query gets (none when it names no date or entity)."""
        dates_matter = self.date_k > 0 or self.date_boost > 0
        windows = dates.query_time_windows(query, now, ranges=self.date_ranges) if dates_matter else []
        hop_seeds = self.hop_seeds if self.hop_boost > 0 else 0
        return ExtraLegs(
            windows=tuple(windows),
            date_k=self.date_k,
            entities=tuple(extract_entities(query)) if self.entity_k > 0 else (),
            entity_k=self.entity_k,
            entity_cap=self.entity_cap,
            hop_seeds=hop_seeds,
            hop_k=self.hop_k,
            hop_entities=self.hop_entities,
            vector_weight=self.vector_weight if self.legs != "text" else 0.0,
            text_weight=self.text_weight if self.legs != "vector" else 0.0,
        )


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
    windows: Sequence[Window] | None = None,
    rerank: Rerank | None = None,
) -> list[tuple[Candidate, float]]:
    """Fuse the legs, lift the best candidates' neighbours, rerank the best (with ``rerank``),
    decay by age, boost what the query dates, diversify with MMR; (candidate, final score) best
    first. ``windows``: the query's time windows when the caller already read them."""
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
    if options.entity_boost > 0:
        relevance = relevance + options.entity_boost * np.asarray([c.in_entity for c in chosen], dtype=np.float64)
    if options.hop_boost > 0 and options.hop_seeds > 0:
        relevance = relevance + options.hop_boost * scoring.hop_bonus(
            relevance,
            [c.created_at for c in chosen],
            [c.entities for c in chosen] if options.hop_entities else None,
            seeds=options.hop_seeds,
        )
    if rerank is not None and options.rerank and query:
        relevance = _reranked(chosen, relevance, rerank, query, options)
    dated = [False] * len(chosen)
    if options.date_boost > 0 and query:
        if windows is None:
            windows = dates.query_time_windows(query, now, ranges=options.date_ranges)
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


def _reranked(
    chosen: Sequence[Candidate], relevance: scoring.Floats, rerank: Rerank, query: str, options: RecallOptions
) -> scoring.Floats:
    """The relevance with the reranker's scores blended in (:func:`.scoring.blend_rerank`).

    The reranker scores the ``rerank_top_n`` most relevant candidates and every one the date leg
    found: the date boost, a later step, may lift those from far below. Every candidate stays in
    the pool, the ones not sent with their relevance unchanged (the blend is on the same scale).
    Everything unchanged when the reranker fails or answers with the wrong count."""
    top = [int(i) for i in np.argsort(-relevance, kind="stable")[: options.rerank_top_n]]
    sent = set(top)
    top += [i for i, c in enumerate(chosen) if c.in_date and i not in sent]
    scores = rerank(query, [chosen[i].content for i in top])
    if scores is None or len(scores) != len(top):
        return relevance
    blended = relevance.copy()
    blended[top] = scoring.blend_rerank(relevance[top], scores, weight=options.rerank_weight)
    return blended
