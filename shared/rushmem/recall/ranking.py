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
from typing import Literal

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


# What ranking did with a candidate it ranked: picked it, left it out for a more diverse pick
# although its score was among the first ``limit``, or scored it past the limit.
RankOutcome = Literal["kept", "mmr", "past_limit"]


@dataclasses.dataclass
class RankTrace:
    """What each ranking step computed, indexed like the candidates it ranked (``ranked``: their
    indexes into ``legs.candidates``; the others were left out by a one-leg plan). An explanation
    words these values and computes none of them again."""

    legs: LegPositions | None = None
    ranked: list[int] = dataclasses.field(default_factory=list)
    similarity: list[float] = dataclasses.field(default_factory=list)
    text: scoring.Floats | None = None  # the text rank as fused: over the best candidate's
    fused: scoring.Floats | None = None
    hop: scoring.Floats | None = None
    rerank_scores: dict[int, float] = dataclasses.field(default_factory=dict)
    relevance: scoring.Floats | None = None  # before decay and the date boost
    decay: scoring.Floats | None = None  # the factor relevance was multiplied by; None: no decay
    dated: list[bool] = dataclasses.field(default_factory=list)  # given the date boost
    final: scoring.Floats | None = None
    order: list[int] = dataclasses.field(default_factory=list)  # MMR's picks (or the top), best first
    mmr_penalty: scoring.Floats | None = None  # what MMR subtracted for likeness; None: no MMR
    by_score: list[int] = dataclasses.field(default_factory=list)  # place by final score, 0 = best
    outcome: list[RankOutcome] = dataclasses.field(default_factory=list)


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
    text = scoring.scale_text_rank([c.text_rank for c in chosen])
    fused = _fused(similarity, text, plan)
    relevance, hop = fused, None
    if plan.hop_boost > 0 and plan.hop_seeds > 0:
        hop = plan.hop_boost * scoring.hop_bonus(fused, [c.created_at for c in chosen], seeds=plan.hop_seeds)
        relevance = fused + hop
    if rerank is not None and plan.rerank and query:
        relevance = _reranked(chosen, relevance, rerank, query, plan, trace)
    before_decay, decay = relevance, None
    dated = _dated(chosen, plan, query, windows, now)
    if plan.decay:
        decay = scoring.decay_factors(
            [c.updated_at for c in chosen],
            # Evergreen memories, and those from the time the query asks about, keep their score.
            [c.is_evergreen or d for c, d in zip(chosen, dated, strict=True)],
            now=now,
            half_life_days=plan.half_life_days,
            floor=plan.decay_floor,
        )
        relevance = relevance * decay
    if any(dated):
        relevance = relevance + plan.date_boost * np.asarray(dated, dtype=np.float64)
    penalty = None
    if plan.mmr:
        # Only an explained recall keeps what MMR subtracted.
        penalty = np.zeros(len(chosen)) if trace is not None else None
        order = scoring.mmr_select(
            relevance,
            np.vstack([c.embedding for c in chosen]),
            lam=plan.mmr_lambda,
            limit=limit,
            sign_codes=any(c.sign_code for c in chosen),
            penalties=penalty,
        )
    else:
        order = [int(i) for i in np.argsort(-relevance, kind="stable")[:limit]]
    if trace is not None:
        trace.legs, trace.ranked, trace.similarity, trace.text = legs, keep, similarity, text
        trace.fused, trace.hop, trace.relevance, trace.decay = fused, hop, before_decay, decay
        trace.dated, trace.final, trace.order, trace.mmr_penalty = dated, relevance, order, penalty
        trace.by_score, trace.outcome = _outcomes(relevance, order, limit)
    return [(chosen[i], float(relevance[i])) for i in order]


def _outcomes(final: scoring.Floats, order: Sequence[int], limit: int) -> tuple[list[int], list[RankOutcome]]:
    """Each candidate's place by final score (0 = best) and what ranking did with it."""
    by_score = [0] * len(final)
    for place, i in enumerate(np.argsort(-final, kind="stable")):
        by_score[int(i)] = place
    picked = set(order)
    outcome: list[RankOutcome] = [
        "kept" if i in picked else "mmr" if place < limit else "past_limit" for i, place in enumerate(by_score)
    ]
    return by_score, outcome


def _fused(similarity: Sequence[float], text: scoring.Floats, plan: RecallPlan) -> scoring.Floats:
    """Both legs weighted, or one alone (the benchmarks' one-leg baselines); ``text`` already
    scaled (:func:`.scoring.scale_text_rank`)."""
    weights = {"vector": (1.0, 0.0), "text": (0.0, 1.0)}.get(plan.legs, (plan.vector_weight, plan.text_weight))
    return scoring.fuse_scaled(similarity, text, vector_weight=weights[0], text_weight=weights[1])


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
