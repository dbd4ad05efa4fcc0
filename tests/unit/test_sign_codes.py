"""MMR over sign bits (what the Data API path brings back instead of whole vectors): the cosine it
estimates from the bits that differ, and the picks it makes."""

from __future__ import annotations

import datetime as dt
import uuid

import numpy as np
import pytest

from rushmem.recall.explain import explain_candidates
from rushmem.recall.plan import RecallPlan
from rushmem.recall.ranking import RankTrace, rank_candidates
from rushmem.recall.scoring import mmr_select
from rushmem.records import Candidate


def _signs(vectors: np.ndarray) -> np.ndarray:
    signs: np.ndarray = np.where(vectors >= 0, 1.0, -1.0) / np.sqrt(vectors.shape[1])
    return signs


def test_the_estimated_cosine_is_close_to_the_true_one() -> None:
    rng = np.random.default_rng(7)
    base = rng.standard_normal((20, 1024))
    vectors = np.concatenate([base + rng.standard_normal((20, 1024)) * s for s in (0.3, 1.0, 3.0)])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    true = vectors @ vectors.T
    codes = _signs(vectors)
    estimated = np.sin(np.pi / 2 * (codes @ codes.T))
    assert float(np.abs(estimated - true).mean()) < 0.05
    assert float(np.abs(estimated - true).max()) < 0.2


def test_mmr_on_sign_codes_skips_a_near_duplicate_as_on_the_vectors() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(1024), rng.standard_normal(1024)
    near_a = a + 0.1 * rng.standard_normal(1024)
    vectors = np.stack([a, near_a, b])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    relevance = [1.0, 0.95, 0.8]
    assert mmr_select(relevance, vectors, lam=0.5, limit=2) == [0, 2]
    assert mmr_select(relevance, _signs(vectors), lam=0.5, limit=2, sign_codes=True) == [0, 2]


def _candidates(vectors: np.ndarray, *, sign_codes: bool) -> list[Candidate]:
    now = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
    return [
        Candidate(
            id=uuid.UUID(int=i + 1),
            user_id="u1",
            project_id=None,
            content=f"memory {i}",
            category="fact",
            source=None,
            is_evergreen=True,
            created_at=now - dt.timedelta(days=i + 1),
            updated_at=now - dt.timedelta(days=i + 1),
            expires_at=None,
            superseded_by=None,
            superseded_at=None,
            metadata={},
            embedding=vector.astype(np.float32),
            distance=distance,
            text_rank=0.0,
            in_vector=True,
            in_text=False,
            sign_code=sign_codes,
        )
        for i, (vector, distance) in enumerate(zip(vectors, (0.2, 0.25, 0.4), strict=True))
    ]


def test_an_explained_mmr_penalty_is_what_mmr_subtracted_on_sign_codes_too() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(1024), rng.standard_normal(1024)
    vectors = np.stack([a, a + 0.5 * rng.standard_normal(1024), b])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    plan = RecallPlan(mmr_lambda=0.5, hop_boost=0.0, date_boost=0.0)
    now = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
    for embeddings, sign_codes in ((vectors, False), (_signs(vectors), True)):
        trace = RankTrace()
        chosen = rank_candidates(_candidates(embeddings, sign_codes=sign_codes), plan, limit=2, now=now, trace=trace)
        assert [c.content for c, _ in chosen] == ["memory 0", "memory 2"]  # the near copy of the best is left out
        explained = {e.content: e for e in explain_candidates(trace, plan, limit=2)}
        copy = explained["memory 1"]
        likeness = float(embeddings[0].astype(np.float32) @ embeddings[1].astype(np.float32))
        cosine = float(np.sin(np.pi / 2 * likeness)) if sign_codes else likeness  # as mmr_select estimates it
        assert copy.outcome == "mmr" and copy.signals.mmr_penalty == pytest.approx(0.5 * cosine, abs=1e-5)
