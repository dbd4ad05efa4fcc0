"""Ranking invariants: what a reranker may and may not change (no I/O: candidates built by hand)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence

import numpy as np
import pytest

from rushmem.config import Settings
from rushmem.recall import dates
from rushmem.recall.plan import RecallPlan
from rushmem.recall.ranking import rank_candidates
from rushmem.recall.scoring import blend_rerank
from rushmem.records import Candidate

NOW = dt.datetime(2023, 9, 1, tzinfo=dt.UTC)
QUERY = "What did Caroline do on 25 May, 2023?"
DATED = dt.datetime(2023, 5, 25, 14, tzinfo=dt.UTC)


def _candidate(i: int, rng: np.random.Generator, *, dated: bool = False) -> Candidate:
    vector = rng.standard_normal(8).astype(np.float32)
    stated = DATED if dated else NOW - dt.timedelta(days=int(rng.integers(1, 400)))
    # Every fifth shares its instant with another (the one-hop bonus has neighbours to lift).
    if i % 5 == 0 and not dated:
        stated = NOW - dt.timedelta(days=40)
    in_text = i % 3 == 0
    return Candidate(
        id=uuid.UUID(int=i + 1),
        user_id="u1",
        project_id=None,
        content=f"memory {i:02d}",
        category="fact",
        source=None,
        is_evergreen=i % 7 == 0,
        created_at=stated,
        updated_at=stated,
        expires_at=None,
        superseded_by=None,
        superseded_at=None,
        metadata={},
        embedding=vector / np.linalg.norm(vector),
        # The date leg's finds are far from the query: only the date boost lifts them.
        distance=0.5 if dated else float(rng.uniform(0.3, 0.9)),
        text_rank=float(rng.uniform(0.01, 0.1)) if in_text and not dated else 0.0,
        in_vector=not dated,
        in_text=in_text and not dated,
        in_date=dated,
    )


def _pool(seed: int = 7, n: int = 60, dated: int = 4) -> list[Candidate]:
    rng = np.random.default_rng(seed)
    return [_candidate(i, rng) for i in range(n)] + [_candidate(n + j, rng, dated=True) for j in range(dated)]


def _equal_scores(query: str, documents: Sequence[str]) -> list[float]:
    return [0.5] * len(documents)


PLAN = RecallPlan.from_settings(Settings())


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("limit", [10, 20])
def test_a_reranker_that_scores_every_candidate_the_same_changes_nothing(seed: int, limit: int) -> None:
    candidates = _pool(seed)
    plain = rank_candidates(candidates, PLAN, limit=limit, now=NOW, query=QUERY)
    reranked = rank_candidates(candidates, PLAN, limit=limit, now=NOW, query=QUERY, rerank=_equal_scores)
    assert [(c.id, s) for c, s in reranked] == [(c.id, s) for c, s in plain]  # the same order, the same scores
    assert any(c.in_date for c, _ in plain)  # the date leg's finds reached the top (the case that broke)


def test_the_reranker_sees_the_date_legs_finds_and_nothing_leaves_the_pool() -> None:
    candidates = _pool(n=60, dated=3)
    sent: list[list[str]] = []

    def recording(query: str, documents: Sequence[str]) -> list[float]:
        sent.append(list(documents))
        return _equal_scores(query, documents)

    rank_candidates(candidates, PLAN.but(rerank_top_n=10), limit=10, now=NOW, query=QUERY, rerank=recording)
    dated = {c.content for c in candidates if c.in_date}
    assert len(sent) == 1 and dated <= set(sent[0]) and len(sent[0]) == 10 + len(dated)
    everything = rank_candidates(
        candidates, PLAN.but(rerank_top_n=10, mmr=False), limit=100, now=NOW, query=QUERY, rerank=recording
    )
    assert len(everything) == len(candidates)  # the candidates the reranker was not sent stay


def test_a_reranker_reorders_within_the_relevance_scale() -> None:
    candidates = _pool(n=40, dated=0)
    options = PLAN.but(decay=False, mmr=False, date_boost=0.0, hop_seeds=0, rerank_top_n=10)
    plain = rank_candidates(candidates, options, limit=40, now=NOW, query="memories")
    # A reranker that prefers the reverse of the fused order, on its own (logit) scale.
    reverse = rank_candidates(
        candidates,
        options.but(rerank_weight=1.0),
        limit=40,
        now=NOW,
        query="memories",
        rerank=lambda q, docs: [float(i) * 3 - 40 for i in range(len(docs))],
    )
    top = [c.id for c, _ in plain[:10]]
    assert [c.id for c, _ in reverse[:10]] == top[::-1]  # weight 1: the reranker's order
    # On the relevance scale: the reranker's best gets the best relevance among them, its worst the least.
    scores = [s for _, s in reverse[:10]]
    assert (scores[0], scores[-1]) == pytest.approx((plain[0][1], plain[9][1]))
    assert scores == pytest.approx(np.linspace(plain[0][1], plain[9][1], 10))
    assert [(c.id, s) for c, s in reverse[10:]] == [(c.id, s) for c, s in plain[10:]]  # not sent: unchanged


def test_a_rerank_blend_maps_the_scores_onto_the_relevance_range() -> None:
    fused = np.array([0.8, 0.4, 0.2])
    # Cohere-style tiny scores: only their order counts.
    assert np.allclose(blend_rerank(fused, [0.001, 0.004, 0.002], weight=1.0), [0.2, 0.8, 0.4])
    assert np.allclose(blend_rerank(fused, [0.001, 0.004, 0.002], weight=0.0), fused)
    assert np.allclose(blend_rerank(fused, [0.001, 0.004, 0.002], weight=0.5), [0.5, 0.6, 0.3])
    # Raw logits below 0: the same mapping.
    assert np.allclose(blend_rerank(fused, [-2.0, 2.0, 0.0], weight=1.0), [0.2, 0.8, 0.5])
    # Scores that tell nothing apart, or no finite score: the relevance to the last bit.
    for scores in ([0.0, 0.0, 0.0], [3.5, 3.5, 3.5], [1.0, float("nan"), 0.0]):
        assert blend_rerank(fused, scores, weight=0.7).tolist() == fused.tolist()
    # Relevance that tells nothing apart: the reranker's order, from 0 up to that relevance.
    assert np.allclose(blend_rerank([0.5, 0.5], [1.0, 0.0], weight=1.0), [0.5, 0.0])


def test_dates_of_the_test_query_are_a_window() -> None:
    assert dates.in_any_window([DATED], dates.query_time_windows(QUERY, NOW)) == [True]


def test_the_plan_takes_the_settings_knobs() -> None:
    knobs = {"half_life_days": 30, "decay_floor": 0.5, "rerank_top_n": 50, "rerank_weight": 1.0}
    tuned = RecallPlan.from_settings(Settings(**knobs, min_relative_score=0.3))  # type: ignore[arg-type]
    assert (tuned.half_life_days, tuned.decay_floor, tuned.rerank_top_n, tuned.rerank_weight) == (30, 0.5, 50, 1.0)
    assert tuned.min_relative_score == 0.3
    back = {name: getattr(PLAN, name) for name in [*knobs, "min_relative_score"]}
    assert tuned.but(**back) == PLAN  # nothing else moved
    # The plan's default cut is the setting's (the suite runs with the setting at 0: tests/conftest.py).
    assert PLAN.min_relative_score == Settings.model_fields["min_relative_score"].default


def test_a_plan_without_date_steps_reads_no_windows() -> None:
    assert PLAN.windows(QUERY, NOW)
    assert PLAN.but(date_k=0, date_boost=0.0).windows(QUERY, NOW) == ()
