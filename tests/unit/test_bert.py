"""The numpy BERT's building blocks against their definitions (the whole model: test_local_embedder.py)."""

from __future__ import annotations

import math

import numpy as np

from rushmem_tools.embedders.bert import gelu, layer_norm


def test_gelu_is_the_erf_gelu_to_float32_precision() -> None:
    x = np.linspace(-12, 12, 2100, dtype=np.float32).reshape(-1, 7)  # 300 rows: more than one block
    exact = np.array([[v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in row] for row in x.astype(np.float64)])
    got = gelu(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.abs(got - exact).max() < 2e-6
    assert np.all(got[x < -9] <= 0) and np.all(got[x < -9] > -1e-12)  # the tail goes to zero, not below
    np.testing.assert_allclose(got[x > 9], x[x > 9], rtol=1e-7)


def test_gelu_keeps_the_input() -> None:
    x = np.array([[-1.0, 0.0, 2.0]], dtype=np.float32)
    before = x.copy()
    gelu(x)
    np.testing.assert_array_equal(x, before)


def test_layer_norm_normalises_the_last_axis() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(3, 5, size=(4, 5, 384)).astype(np.float32)
    weight = rng.normal(size=384).astype(np.float32)
    bias = rng.normal(size=384).astype(np.float32)
    got = layer_norm(x, weight, bias, 1e-12)
    x64 = x.astype(np.float64)
    expected = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-12) * weight + bias
    assert np.abs(got - expected).max() < 1e-4
