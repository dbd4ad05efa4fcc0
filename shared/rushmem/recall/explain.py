"""An explained recall (``explain``): what ranking saw of every candidate and why each is in the
answer or not, and, for memories the caller names, why one was not a candidate at all.

Ranking fills a :class:`~.ranking.RankTrace` only when it is given one, so a recall that asks for no
explanation does no extra work; everything else here runs after ranking, from that record. No I/O.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rushmem.recall import scoring
from rushmem.recall.ranking import RankTrace
from rushmem.records import NamedRow
from rushmem_contract.models import ExplainedCandidate, ExplainedName, RecallSignals

if TYPE_CHECKING:
    from rushmem.recall.plan import RecallPlan


def plan_weights(plan: RecallPlan) -> dict[str, float]:
    """The plan's weights an explanation states (the rest of the plan is in the signals)."""
    return {
        "vector": plan.vector_weight,
        "text": plan.text_weight,
        "date_boost": plan.date_boost,
        "hop": plan.hop_boost,
        "rerank": plan.rerank_weight,
        "mmr_lambda": plan.mmr_lambda if plan.mmr else 1.0,
        "decay_half_life_days": plan.half_life_days if plan.decay else 0.0,
        "decay_floor": plan.decay_floor if plan.decay else 1.0,
    }


def _mmr_penalties(trace: RankTrace, embeddings: scoring.Floats, lam: float, *, sign_codes: bool) -> list[float]:
    """Per ranked candidate, what MMR subtracted for likeness (:func:`.scoring.likeness`): for a
    pick, to those picked before it; for the others, to every pick (what kept them out)."""
    penalty = [0.0] * len(embeddings)
    closest = np.full(len(embeddings), -np.inf)  # to the picks so far
    for i in trace.order:
        if np.isfinite(closest[i]):
            penalty[i] = (1.0 - lam) * float(closest[i])
        closest = np.maximum(closest, scoring.likeness(embeddings, i, sign_codes=sign_codes))
    picked = set(trace.order)
    for i in range(len(embeddings)):
        if i not in picked and np.isfinite(closest[i]):
            penalty[i] = (1.0 - lam) * float(closest[i])
    return penalty


def explain_candidates(
    trace: RankTrace, plan: RecallPlan, *, limit: int, min_score: float, now: dt.datetime
) -> list[ExplainedCandidate]:
    """Every candidate with its signals, final score and outcome, in ranking order: the answer
    first, then the dropped by score."""
    legs = trace.legs
    if legs is None or trace.final is None or trace.relevance is None:
        return []
    ranked = trace.ranked
    chosen = [legs.candidates[i] for i in ranked]
    final = trace.final
    text = np.maximum(np.asarray([c.text_rank for c in chosen], dtype=np.float64), 0.0)
    best_text = float(text.max(initial=0.0))
    decay = np.ones(len(chosen))
    if plan.decay:
        decay = scoring.apply_time_decay(
            decay,
            [c.updated_at for c in chosen],
            [c.is_evergreen or d for c, d in zip(chosen, trace.dated, strict=True)],
            now=now,
            half_life_days=plan.half_life_days,
            floor=plan.decay_floor,
        )
    penalties = (
        _mmr_penalties(
            trace,
            np.vstack([c.embedding for c in chosen]).astype(np.float64),
            plan.mmr_lambda,
            sign_codes=any(c.sign_code for c in chosen),
        )
        if plan.mmr
        else None
    )
    by_relevance = {int(i): r for r, i in enumerate(np.argsort(-final, kind="stable"))}
    picks = {i: p for p, i in enumerate(trace.order)}
    out: list[tuple[tuple[int, float], ExplainedCandidate]] = []
    for i, c in enumerate(chosen):
        j = ranked[i]
        score = float(final[i])
        if i in picks and not (min_score > 0 and score < min_score):
            outcome, why = "kept", "in the answer"
        elif i in picks:
            outcome, why = "below_min_score", f"its score {score:.4f} is below the minimum score {min_score:g}"
        elif by_relevance[i] < limit:
            outcome = "mmr"
            why = (
                f"relevant enough for the first {limit}, but MMR chose less alike memories "
                f"(penalty {penalties[i]:.4f} for likeness to one already chosen)"
                if penalties is not None
                else "left out for a more diverse pick"
            )
        else:
            outcome, why = "past_limit", f"{by_relevance[i] + 1}th by score; the answer holds {limit}"
        signals = RecallSignals(
            vector_similarity=round(trace.similarity[i], 6),
            vector_position=legs.vector_rank[j],
            text_rank=round(float(text[i]) / best_text, 6) if best_text > 0 else 0.0,
            text_position=legs.text_position[j],
            date_window=bool(trace.dated[i]) if trace.dated else False,
            hop_bonus=round(float(trace.hop[i]), 6) if trace.hop is not None else 0.0,
            reranker_score=trace.rerank_scores.get(i),
            relevance=round(float(trace.relevance[i]), 6),
            decay=round(float(decay[i]), 6),
            mmr_penalty=round(penalties[i], 6) if penalties is not None else None,
        )
        out.append(
            (
                (picks.get(i, len(picks) + by_relevance[i]), -score),
                ExplainedCandidate(
                    id=c.id,
                    content=c.content,
                    category=c.category,
                    project_id=c.project_id,
                    created_at=c.created_at,
                    signals=signals,
                    score=round(score, 4),
                    position=None,  # numbered below, once sorted
                    outcome=outcome,  # type: ignore[arg-type]
                    why=why,
                ),
            )
        )
    ranked_set = set(ranked)
    for j, c in enumerate(legs.candidates):
        if j in ranked_set:
            continue
        signals = RecallSignals(
            vector_similarity=round(1.0 - c.distance, 6),
            vector_position=legs.vector_rank[j],
            text_rank=0.0,
            text_position=legs.text_position[j],
            date_window=c.in_date,
            hop_bonus=0.0,
            reranker_score=None,
            relevance=0.0,
            decay=1.0,
            mmr_penalty=None,
        )
        left_out = ExplainedCandidate(
            id=c.id,
            content=c.content,
            category=c.category,
            project_id=c.project_id,
            created_at=c.created_at,
            signals=signals,
            score=0.0,
            position=None,
            outcome="leg_off",
            why=f"this plan ranks the {plan.legs} leg only",
        )
        out.append(((len(chosen) * 2 + j, 0.0), left_out))
    out.sort(key=lambda pair: pair[0])
    explained = [e for _, e in out]
    position = 0
    for e in explained:
        if e.outcome == "kept":
            position += 1
            e.position = position
    return explained


def explain_named(
    row: NamedRow | None,
    *,
    candidate: bool,
    project_id: str | None,
    now: dt.datetime | None,
    evaluated_at: dt.datetime,
    as_of: dt.datetime | None,
    include_inactive: bool,
    k: int,
) -> tuple[str, str]:
    """(outcome, why) for a memory the caller named."""
    if candidate:
        return "candidate", "a candidate: see its entry among the candidates"
    if row is None:
        return "not_found", "this user has no memory with this id (never stored, or deleted)"
    if row.pending:
        return "pending_review", "waiting for review: it is recalled once a person approves it"
    if project_id is not None and row.project_id not in (None, project_id):
        return (
            "another_scope",
            f"it belongs to project {row.project_id!r}; this recall sees {project_id!r} and user-wide",
        )
    if not include_inactive:
        if as_of is not None:
            if row.valid_from > as_of:
                return "not_yet_valid", f"true only from {row.valid_from.isoformat()}, after as_of"
            if row.valid_until is not None and row.valid_until <= as_of:
                return "superseded", f"superseded: true until {row.valid_until.isoformat()}, before as_of"
            if row.expires_at is not None and row.expires_at <= as_of:
                return "expired", f"expired at {row.expires_at.isoformat()}, before as_of"
        else:
            if now is not None and row.created_at > now:
                return "not_yet_valid", f"stored at {row.created_at.isoformat()}, after the recall's time"
            if row.superseded_at is not None and (now is None or row.valid_until is None or row.valid_until <= now):
                return "superseded", "superseded by a later memory (see its history)"
            if row.expires_at is not None and row.expires_at <= evaluated_at:
                return "expired", f"expired at {row.expires_at.isoformat()}"
    if not row.in_filters:
        return "filtered_out", "the recall's filters leave it out"
    if not row.in_scope:
        return "another_scope", "outside this recall's scope"
    text = "the full-text leg found it too weak" if row.text_match else "no word of the query matches it"
    nearer = (row.vector_position or 1) - 1
    return (
        "not_near_enough",
        f"in scope, but {nearer} memories are nearer the query and the vector leg takes {k}; {text}",
    )


def named_explanations(
    ids: Sequence[uuid.UUID],
    rows: Mapping[uuid.UUID, NamedRow],
    candidates: set[uuid.UUID],
    **scope: Any,
) -> list[ExplainedName]:
    """:func:`explain_named` for each named id, in the caller's order."""
    out = []
    for memory_id in dict.fromkeys(ids):
        row = rows.get(memory_id)
        outcome, why = explain_named(row, candidate=memory_id in candidates, **scope)
        out.append(
            ExplainedName(
                id=memory_id,
                outcome=outcome,  # type: ignore[arg-type]
                why=why,
                vector_similarity=round(1.0 - row.distance, 6)
                if row is not None and row.distance is not None
                else None,
                vector_position=row.vector_position if row is not None else None,
                text_match=row.text_match if row is not None else None,
            )
        )
    return out
