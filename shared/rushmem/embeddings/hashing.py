"""Deterministic feature hashing: lexical only, NOT semantic.

For tests, smoke runs and benchmarks that measure the database path: no model, no
network, the same vector for the same text in every process ("TypeScript" and "TS" are
unrelated to it).
"""

from __future__ import annotations

import hashlib
import itertools
import re

import numpy as np
import numpy.typing as npt

from rushmem.config import Settings
from rushmem.embeddings.base import Embedder

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder(Embedder):
    provider = "hash"
    model = "feature-hash-v1"

    def __init__(self, dimension: int = 384) -> None:
        self.dimension = dimension
        self.batch_size = 1024

    @classmethod
    def from_settings(cls, settings: Settings) -> HashEmbedder:
        return cls(dimension=settings.embedding_dimensions or 384)

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.casefold())
        if not words:  # punctuation only: hash the text itself, never a zero vector
            return [text.strip()]
        # Unigrams plus bigrams, so word order carries a little signal.
        return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]

    def _embed_batch(self, texts: list[str]) -> npt.ArrayLike:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                # Low bits pick the bucket, the top bit the sign (halves collision bias).
                out[row, value % self.dimension] += 1.0 if value >> 63 else -1.0
        return out
