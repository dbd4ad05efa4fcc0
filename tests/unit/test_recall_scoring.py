"""Fusion, decay and MMR maths."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from rushmem.recall.scoring import decay_factors, fuse_scaled, mmr_select, scale_text_rank

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


def test_weighted_fusion_normalises_tiny_ts_rank_values() -> None:
    # Raw ts_rank values are ~0.01: unnormalised, a 0.3 weight would barely move anything.
    scores = fuse_scaled([0.50, 0.50], scale_text_rank([0.001, 0.01]), vector_weight=0.7, text_weight=0.3)
    assert scores[1] - scores[0] == pytest.approx(0.3 * 0.9)
    assert scores.max() <= 1.0


def test_weighted_fusion_without_text_matches_is_cosine() -> None:
    scores = fuse_scaled([0.9, 0.2, -0.3], scale_text_rank([0, 0, 0]), vector_weight=0.7, text_weight=0.3)
    assert scores == pytest.approx([0.9 * 0.7, 0.2 * 0.7, 0.0])


def test_decay_halves_the_decaying_part_at_the_half_life() -> None:
    old = NOW - dt.timedelta(days=30)
    out = decay_factors([old, NOW], [False, False], now=NOW, half_life_days=30, floor=0.2)
    assert out[0] == pytest.approx(0.2 + 0.8 * 0.5)
    assert out[1] == pytest.approx(1.0)


def test_evergreen_and_future_memories_do_not_decay() -> None:
    ancient = NOW - dt.timedelta(days=3650)
    future = NOW + dt.timedelta(days=1)  # clock skew between writer and reader
    out = decay_factors([ancient, future], [True, False], now=NOW, half_life_days=10)
    assert out == pytest.approx([1.0, 1.0])


def test_mmr_skips_a_near_duplicate_for_a_different_relevant_memory() -> None:
    a = np.array([1.0, 0.0, 0.0])
    a_dup = np.array([0.999, 0.0447, 0.0])
    b = np.array([0.0, 1.0, 0.0])
    vectors = np.vstack([a, a_dup / np.linalg.norm(a_dup), b])
    assert mmr_select([1.0, 0.98, 0.9], vectors, lam=0.7, limit=2) == [0, 2]


def test_mmr_with_lambda_one_is_plain_relevance_order() -> None:
    vectors = np.eye(3)
    assert mmr_select([0.2, 0.9, 0.5], vectors, lam=1.0, limit=3) == [1, 2, 0]


def test_mmr_returns_at_most_the_candidates() -> None:
    assert mmr_select([0.5], np.eye(1), lam=0.5, limit=10) == [0]
    assert mmr_select([], np.zeros((0, 3)), lam=0.5, limit=10) == []


def _mmr_reference(relevance: np.ndarray, vectors: np.ndarray, lam: float, limit: int) -> list[int]:
    """The textbook greedy MMR over the full similarity matrix."""
    rel = relevance / relevance.max()
    similarity = vectors @ vectors.T
    chosen: list[int] = []
    for _ in range(min(limit, len(rel))):
        best, best_gain = -1, -np.inf
        for i in range(len(rel)):
            if i in chosen:
                continue
            redundancy = max((similarity[i, j] for j in chosen), default=0.0)
            gain = lam * rel[i] - (1 - lam) * redundancy
            if gain > best_gain:
                best, best_gain = i, gain
        chosen.append(best)
    return chosen


def test_mmr_picks_what_greedy_mmr_over_the_full_similarity_matrix_picks() -> None:
    # mmr_select computes only the similarity rows it needs (no BLAS matmul); the picks
    # must stay those of the plain algorithm.
    rng = np.random.default_rng(42)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        vectors = rng.standard_normal((n, 16))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        relevance = rng.random(n) + 0.01
        lam = float(rng.choice([0.3, 0.5, 0.8]))
        limit = int(rng.integers(1, 12))
        assert mmr_select(relevance, vectors, lam=lam, limit=limit) == _mmr_reference(relevance, vectors, lam, limit)


def test_hop_bonus_lifts_what_was_stated_with_the_best_candidates() -> None:
    from rushmem.recall.scoring import hop_bonus

    t1, t2, t3 = (dt.datetime(2023, 1, d, tzinfo=dt.UTC) for d in (1, 2, 3))
    relevance = [0.9, 0.2, 0.8, 0.1, 0.3]
    stated = [t1, t1, t2, t3, t2]
    bonus = hop_bonus(relevance, stated, seeds=1)
    assert list(bonus) == [0.0, 0.9, 0.0, 0.0, 0.0]  # only the best seed's neighbour, never the seed itself
    bonus = hop_bonus(relevance, stated, seeds=2)
    assert list(bonus) == [0.0, 0.9, 0.0, 0.0, 0.8]
    assert not hop_bonus(relevance, stated, seeds=0).any()
