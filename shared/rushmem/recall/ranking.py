"""How recall orders its candidates, as its :class:`~.plan.RecallPlan` says: each leg's positions
(with deterministic tie-breaks), weighted fusion, the hop bonus, an optional reranker's scores,
time decay, the dates a query names, MMR. No I/O of its own (a reranker is passed in); the maths
is in :mod:`.scoring`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rushmem.recall import dates, scoring
from rushmem.recall.plan import RecallPlan
from rushmem.records import Candidate, Window

# Scores of the documents (one each, same order) for the query, or None when the reranker failed
# (the fused order then stands): see rushmem.rerank.
Rerank = Callable[[str, Sequence[str]], Sequence[float] | None]


@dataclass(frozen=True)
class LegPositions:
    """Candidates in a stable order, with their 1-based position in each leg (None: not in it)."""

    candidates: list[Candidate]
    vector_rank: list[int | None]
    text_position: list[int | None]


@dataclasses.dataclass
class RankTrace:
    """Each ranking step's values, indexed like the candidates it ranked (``ranked``: their
    indexes into ``legs.candidates``; the others were left out by a one-leg plan)."""

    legs: LegPositions | None = None
    ranked: list[int] = dataclasses.field(default_factory=list)
    similarity: list[float] = dataclasses.field(default_factory=list)
    fused: scoring.Floats | None = None
    hop: scoring.Floats | None = None
    rerank_scores: dict[int, float] = dataclasses.field(default_factory=dict)
    relevance: scoring.Floats | None = None  # before decay and the date boost
    dated: list[bool] = dataclasses.field(default_factory=list)
    final: scoring.Floats | None = None
    order: list[int] = dataclasses.field(default_factory=list)  # MMR's picks (or the top), best first


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
    plan: RecallPlan,
    *,
    limit: int,
    now: dt.datetime,
    query: str = "",
    windows: Sequence[Window] | None = None,
    rerank: Rerank | None = None,
    trace: RankTrace | None = None,
) -> list[tuple[Candidate, float]]:
    """Fuse the legs, lift the best candidates' neighbours, rerank the best (with ``rerank``),
    decay by age, boost what the query dates, diversify with MMR; (candidate, final score) best
    first. ``windows``: the query's time windows when the caller already read them. ``trace``
    (an explained recall only: nothing is recorded otherwise) receives each step's values."""
    legs = leg_positions(candidates)
    keep = list(range(len(legs.candidates)))
    if plan.legs == "vector":
        keep = [i for i in keep if legs.vector_rank[i] is not None]
    elif plan.legs == "text":
        keep = [i for i in keep if legs.text_position[i] is not None]
    if not keep:
        if trace is not None:
            trace.legs = legs
        return []
    chosen = [legs.candidates[i] for i in keep]
    similarity = [1.0 - c.distance for c in chosen]
    fused = _fused(similarity, [c.text_rank for c in chosen], plan)
    relevance, hop = fused, None
    if plan.hop_boost > 0 and plan.hop_seeds > 0:
        hop = plan.hop_boost * scoring.hop_bonus(fused, [c.created_at for c in chosen], seeds=plan.hop_seeds)
        relevance = fused + hop
    if rerank is not None and plan.rerank and query:
        relevance = _reranked(chosen, relevance, rerank, query, plan, trace)
    before_decay = relevance
    dated = _dated(chosen, plan, query, windows, now)
    if plan.decay:
        relevance = scoring.apply_time_decay(
            relevance,
            [c.updated_at for c in chosen],
            # Evergreen memories, and those from the time the query asks about, keep their score.
            [c.is_evergreen or d for c, d in zip(chosen, dated, strict=True)],
            now=now,
            half_life_days=plan.half_life_days,
            floor=plan.decay_floor,
        )
    if any(dated):
        relevance = relevance + plan.date_boost * np.asarray(dated, dtype=np.float64)
    if plan.mmr:
        order = scoring.mmr_select(
            relevance,
            np.vstack([c.embedding for c in chosen]),
            lam=plan.mmr_lambda,
            limit=limit,
            sign_codes=any(c.sign_code for c in chosen),
        )
    else:
        order = [int(i) for i in np.argsort(-relevance, kind="stable")[:limit]]
    if trace is not None:
        trace.legs, trace.ranked, trace.similarity, trace.fused, trace.hop = legs, keep, similarity, fused, hop
        trace.relevance, trace.dated, trace.final, trace.order = before_decay, dated, relevance, order
    return [(chosen[i], float(relevance[i])) for i in order]


def _fused(similarity: Sequence[float], text_rank: Sequence[float], plan: RecallPlan) -> scoring.Floats:
    """Both legs weighted, or one alone (the benchmarks' one-leg baselines)."""
    if plan.legs == "vector":
        return scoring.fuse_weighted(similarity, text_rank, vector_weight=1.0, text_weight=0.0)
    if plan.legs == "text":
        return scoring.fuse_weighted(similarity, text_rank, vector_weight=0.0, text_weight=1.0)
    return scoring.fuse_weighted(similarity, text_rank, vector_weight=plan.vector_weight, text_weight=plan.text_weight)


def _dated(
    chosen: Sequence[Candidate], plan: RecallPlan, query: str, windows: Sequence[Window] | None, now: dt.datetime
) -> list[bool]:
    """Per candidate, whether it was stated inside a window the query names."""
    if plan.date_boost > 0 and query:
        if windows is None:
            windows = plan.windows(query, now)
        if windows:
            return dates.in_any_window([c.created_at for c in chosen], windows)
    return [False] * len(chosen)


def _reranked(
    chosen: Sequence[Candidate],
    relevance: scoring.Floats,
    rerank: Rerank,
    query: str,
    plan: RecallPlan,
    trace: RankTrace | None = None,
) -> scoring.Floats:
    """The relevance with the reranker's scores blended in (:func:`.scoring.blend_rerank`).

    The reranker scores the ``rerank_top_n`` most relevant candidates and every one the date leg
    found: the date boost, a later step, may lift those from far below. Every candidate stays in
    the pool, the ones not sent with their relevance unchanged (the blend is on the same scale).
    Everything unchanged when the reranker fails or answers with the wrong count."""
    top = [int(i) for i in np.argsort(-relevance, kind="stable")[: plan.rerank_top_n]]
    sent = set(top)
    top += [i for i, c in enumerate(chosen) if c.in_date and i not in sent]
    scores = rerank(query, [chosen[i].content for i in top])
    if scores is None or len(scores) != len(top):
        return relevance
    if trace is not None:
        trace.rerank_scores = dict(zip(top, (float(s) for s in scores), strict=True))
    blended = relevance.copy()
    blended[top] = scoring.blend_rerank(relevance[top], scores, weight=plan.rerank_weight)
    return blended
