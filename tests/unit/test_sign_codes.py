"""MMR over sign bits (what the Data API path brings back instead of whole vectors): the cosine it
estimates from the bits that differ, and the picks it makes."""

from __future__ import annotations

import numpy as np

from rushmem.recall.scoring import mmr_select


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
