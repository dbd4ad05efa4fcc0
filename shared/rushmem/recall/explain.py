"""An explained recall (``explain``): what ranking saw of every candidate and why each is in the
answer or not, and, for memories the caller names, why one was not a candidate at all.

Ranking records what it computed in a :class:`~.ranking.RankTrace` only when it is given one, so a
recall that asks for no explanation does no extra work; this module only words that record. No I/O.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rushmem.recall.ranking import RankTrace
from rushmem.records import Candidate, NamedRow
from rushmem_contract.models import CandidateOutcome, ExplainedCandidate, ExplainedName, RecallSignals

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


def explain_candidates(trace: RankTrace, plan: RecallPlan, *, limit: int, min_score: float) -> list[ExplainedCandidate]:
    """Every candidate with its signals, final score and outcome, in ranking order: the answer
    first, then the dropped by score. Only words what ranking recorded in ``trace``; ``min_score``
    is the cut the caller applied after ranking."""
    legs, final, relevance, text = trace.legs, trace.final, trace.relevance, trace.text
    if legs is None or final is None or relevance is None or text is None:
        return []
    ranked, penalties = trace.ranked, trace.mmr_penalty
    picks = {i: p for p, i in enumerate(trace.order)}
    out: list[tuple[tuple[int, float], ExplainedCandidate]] = []
    for i, j in enumerate(ranked):
        score, place = float(final[i]), trace.by_score[i]
        outcome: CandidateOutcome = trace.outcome[i]
        why = "in the answer"
        if outcome == "kept" and min_score > 0 and score < min_score:
            outcome, why = "below_min_score", f"its score {score:.4f} is below the minimum score {min_score:g}"
        elif outcome == "mmr":
            why = (
                f"relevant enough for the first {limit}, but MMR chose less alike memories "
                f"(penalty {penalties[i]:.4f} for likeness to one already chosen)"
                if penalties is not None
                else "left out for a more diverse pick"
            )
        elif outcome == "past_limit":
            why = f"{place + 1}th by score; the answer holds {limit}"
        signals = RecallSignals(
            vector_similarity=round(trace.similarity[i], 6),
            vector_position=legs.vector_rank[j],
            text_rank=round(float(text[i]), 6),
            text_position=legs.text_position[j],
            date_window=bool(trace.dated[i]),
            hop_bonus=round(float(trace.hop[i]), 6) if trace.hop is not None else 0.0,
            reranker_score=trace.rerank_scores.get(i),
            relevance=round(float(relevance[i]), 6),
            decay=round(float(trace.decay[i]), 6) if trace.decay is not None else 1.0,
            mmr_penalty=round(float(penalties[i]), 6) if penalties is not None else None,
        )
        key = (picks.get(i, len(picks) + place), -score)
        out.append((key, _explained(legs.candidates[j], signals, score, outcome, why)))
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
        why = f"this plan ranks the {plan.legs} leg only"
        out.append(((len(ranked) * 2 + j, 0.0), _explained(c, signals, 0.0, "leg_off", why)))
    out.sort(key=lambda pair: pair[0])
    explained = [e for _, e in out]
    position = 0
    for e in explained:
        if e.outcome == "kept":
            position += 1
            e.position = position
    return explained


# What an explained candidate shows of its candidate as it is (the rest is the explanation's).
_SHOWN = [name for name in ExplainedCandidate.model_fields if name in {f.name for f in dataclasses.fields(Candidate)}]


def _explained(
    c: Candidate, signals: RecallSignals, score: float, outcome: CandidateOutcome, why: str
) -> ExplainedCandidate:
    shown = {name: getattr(c, name) for name in _SHOWN}
    # Its position is numbered once the candidates are sorted.
    return ExplainedCandidate(**shown, signals=signals, score=round(score, 4), position=None, outcome=outcome, why=why)


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
