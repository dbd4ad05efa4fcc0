"""Rerank maths on the candidates of every leg: fusion (here only), the hop bonus, a reranker's
scores blended in, time decay, MMR. No I/O.

All functions take and return plain numpy arrays aligned with the candidate list.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


def scale_text_rank(text_rank: Sequence[float]) -> Floats:
    """ts_rank over the best candidate's, 0..1 (all 0 when none matched)."""
    text = np.maximum(np.asarray(text_rank, dtype=np.float64), 0.0)
    best = text.max(initial=0.0)
    return text / best if best > 0 else text


def fuse_scaled(similarity: Sequence[float], text: Floats, *, vector_weight: float, text_weight: float) -> Floats:
    """The article's 0.7 x vector + 0.3 x text, with both parts on a 0..1 scale: cosine similarity
    clipped to [0, 1], ``text`` the ts_rank :func:`scale_text_rank` scaled (a weight on raw ts_rank,
    tiny and unbounded, does almost nothing). Divided by the weights' sum, so it stays in [0, 1]."""
    sim = np.clip(np.asarray(similarity, dtype=np.float64), 0.0, 1.0)
    return (vector_weight * sim + text_weight * text) / (vector_weight + text_weight)


def decay_factors(
    timestamps: Sequence[dt.datetime],
    evergreen: Sequence[bool],
    *,
    now: dt.datetime,
    half_life_days: float,
    floor: float = 0.0,
) -> Floats:
    """Per memory, ``floor + (1 - floor) * 0.5 ** (age / half_life)``.

    Evergreen memories (identity, standing rules) do not decay (1); a memory from the future
    (clock skew) counts as brand new. ``floor`` keeps old but relevant facts findable.
    """
    out = np.ones(len(timestamps), dtype=np.float64)
    for i, (ts, keep) in enumerate(zip(timestamps, evergreen, strict=True)):
        if keep:
            continue
        age_days = max((now - ts).total_seconds(), 0.0) / 86400.0
        out[i] = floor + (1.0 - floor) * math.pow(0.5, age_days / half_life_days)
    return out


def hop_bonus(relevance: npt.ArrayLike, stated_at: Sequence[dt.datetime], *, seeds: int) -> Floats:
    """Per candidate, the relevance of the best seed it neighbours (0 if none): the ``seeds``
    most relevant candidates are the seeds; a neighbour was stated at the same instant (written
    together: one conversation, one request). A seed is no neighbour of itself, but may be
    another seed's.

    Evidence for a question is often spread over what was said together: the best match
    vouches for the rest of its conversation.
    """
    rel = np.asarray(relevance, dtype=np.float64)
    out = np.zeros(len(rel), dtype=np.float64)
    if seeds <= 0 or len(rel) == 0:
        return out
    instants = np.array([t.timestamp() for t in stated_at], dtype=np.float64)
    for s in (int(i) for i in np.argsort(-rel, kind="stable")[:seeds]):
        linked = instants == instants[s]
        linked[s] = False
        out = np.where(linked, np.maximum(out, rel[s]), out)
    return out


def blend_rerank(relevance: npt.ArrayLike, rerank_scores: npt.ArrayLike, *, weight: float) -> Floats:
    """``weight`` x the reranker's scores + (1 - weight) x the relevance, on the relevance scale.

    Providers score on different scales (Cohere's 0..1 often tiny, some raw logits below 0) and
    only the order within one answer means anything, so the scores are mapped linearly onto the
    range the candidates' relevance spans: the worst-scored gets the least relevance among them,
    the best-scored the most. The blend then stays on the scale of fusion, so the boosts, decay,
    MMR and ``min_score`` after it weigh what they weigh without a reranker. Scores that tell the
    candidates nothing apart (all equal) leave the relevance exactly as it was.
    """
    rel = np.asarray(relevance, dtype=np.float64)
    scores = np.asarray(rerank_scores, dtype=np.float64)
    if len(rel) == 0 or not np.isfinite(scores).all():
        return rel.copy()
    low, high = float(scores.min()), float(scores.max())
    if high <= low:
        return rel.copy()
    floor, span = float(rel.min()), float(rel.max() - rel.min())
    if span <= 0:  # the relevance tells them nothing apart: map onto 0 .. their relevance
        floor, span = 0.0, float(rel.max())
    mapped = floor + (scores - low) / (high - low) * span
    # rel + w x (mapped - rel), not (1 - w) x rel + w x mapped: a candidate whose mapped score is
    # its relevance keeps it to the last bit.
    return rel + weight * (mapped - rel)


def mmr_select(
    relevance: npt.ArrayLike,
    embeddings: npt.ArrayLike,
    *,
    lam: float,
    limit: int,
    sign_codes: bool = False,
    penalties: Floats | None = None,
) -> list[int]:
    """Maximal marginal relevance: pick ``limit`` indexes, trading relevance for novelty.

    Each step takes argmax of ``lam * rel(i) - (1 - lam) * max_j cos(i, j)`` over the
    already picked j. Relevance is scaled to [0, 1] first so both terms are comparable.
    Embeddings must be unit vectors. Ties go to the earlier candidate.

    ``sign_codes``: the embeddings are sign bits as +-1/sqrt(d) unit vectors; their dot product is
    1 - 2h/d for h differing bits, and the cosine it estimates is cos(pi h / d) = sin(pi/2 x dot)
    (the angle a differing bit stands for; mean error ~0.03 on 1024-d vectors).

    ``penalties`` (an explained recall's; zeros, one per candidate) receives the likeness term
    subtracted: for a pick, the one it was picked with; for the others, the one after the last pick
    (what kept them out).
    """
    rel = np.asarray(relevance, dtype=np.float64)
    n = len(rel)
    if n == 0 or limit <= 0:
        return []
    top = rel.max()
    rel = rel / top if top > 0 else rel
    if lam >= 1.0:
        return [int(i) for i in np.argsort(-rel, kind="stable")[:limit]]
    vectors = np.asarray(embeddings, dtype=np.float64)
    chosen: list[int] = []
    max_sim = np.full(n, -np.inf)
    available = np.ones(n, dtype=bool)
    for _ in range(min(limit, n)):
        redundancy = np.where(np.isfinite(max_sim), max_sim, 0.0)
        gain = np.where(available, lam * rel - (1.0 - lam) * redundancy, -np.inf)
        pick = int(np.argmax(gain))
        if penalties is not None:
            penalties[pick] = (1.0 - lam) * redundancy[pick]
        chosen.append(pick)
        available[pick] = False
        max_sim = np.maximum(max_sim, likeness(vectors, pick, sign_codes=sign_codes))
    if penalties is not None:
        penalties[available] = (1.0 - lam) * max_sim[available]
    return chosen


def likeness(vectors: Floats, to: int, *, sign_codes: bool = False) -> Floats:
    """The cosine of every row of ``vectors`` (unit vectors) with row ``to``, as MMR weighs it
    (over sign codes, its estimate: see :func:`mmr_select`)."""
    # Only one row of the similarity matrix, and by einsum rather than `@`: a matmul goes to the
    # BLAS thread pool, whose wake-ups cost more than this tiny product and stall for
    # milliseconds when the other cores are busy.
    similarity: Floats = np.einsum("ij,j->i", vectors, vectors[to])
    return np.sin(np.pi / 2 * similarity) if sign_codes else similarity
