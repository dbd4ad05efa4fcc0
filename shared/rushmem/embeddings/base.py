"""The embedder interface and the vector conventions every provider follows."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rushmem.usage import record_usage
from rushmem_contract.errors import ProviderError

Vectors = npt.NDArray[np.float32]


def normalize_rows(matrix: npt.ArrayLike) -> Vectors:
    """Unit-length rows (float32), so cosine similarity is a dot product; zero rows stay zero."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim == 1:
        m = m[None, :]
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    out: Vectors = np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)
    return out


class Embedder(ABC):
    """Turns texts into unit vectors of a fixed dimension.

    ``fingerprint`` names the model; the database records it so that vectors from two
    different models are never mixed in one column.
    """

    provider: str
    model: str
    dimension: int
    batch_size: int = 64
    # Texts per provider request, for the usage count: None = a batch in one request (OpenAI,
    # a local model), 1 = one request per text (Titan).
    texts_per_request: int | None = None
    # The setting of the API key (a secret) it is built with, if it holds one: the service lets go
    # of such a provider with the cached secrets (before a SnapStart snapshot) and builds it again.
    api_key_setting: str | None = None

    @property
    def fingerprint(self) -> str:
        return f"{self.provider}:{self.model}:{self.dimension}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed many texts in as few provider calls as the batch size allows."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = self._embed_batches(
            [list(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        )
        matrix = np.asarray(np.vstack(parts), dtype=np.float32)
        if matrix.shape != (len(texts), self.dimension):
            raise ProviderError(
                self.provider,
                f"model {self.model} returned vectors of shape {matrix.shape[1:]}, expected ({self.dimension},)",
            )
        if not np.isfinite(matrix).all():  # normalising would silently turn such a row into zeros
            raise ProviderError(self.provider, f"model {self.model} returned a vector with NaN or infinite values")
        calls = len(parts) if self.texts_per_request is None else -(-len(texts) // self.texts_per_request)
        record_usage(
            "embedding", self.fingerprint, calls=calls, characters=sum(len(t) for t in texts), items=len(texts)
        )
        return normalize_rows(matrix)

    def embed_query(self, text: str) -> Vectors:
        """One query vector (1-D). Symmetric models embed queries like documents."""
        row: Vectors = self.embed([text])[0]
        return row

    def _embed_batches(self, batches: list[list[str]]) -> list[npt.ArrayLike]:
        """Raw vectors of each batch, in order; one after the other unless a provider overrides it."""
        return [self._embed_batch(batch) for batch in batches]

    @abstractmethod
    def _embed_batch(self, texts: list[str]) -> npt.ArrayLike:
        """Raw vectors for at most ``batch_size`` texts, in input order."""
