"""The reranker interface: a query and documents in, one relevance score per document out; or
None, and the recall goes on with its fused order."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence

from rushmem.config import Settings
from rushmem.providers.retry import RetryPolicy
from rushmem_contract.errors import ProviderError

logger = logging.getLogger(__name__)


def short_retry(settings: Settings) -> RetryPolicy:
    """The shared retry policy with the rerank timeout as its budget: recall cannot wait longer."""
    return dataclasses.replace(RetryPolicy.from_settings(settings), budget_s=settings.rerank_timeout_s)


class Reranker(ABC):
    """Scores documents against a query (subclasses implement :meth:`_scores`).

    :meth:`scores` never raises: a provider error, a timeout (after the retries the short
    budget allows) or an answer that does not fit is logged and counted in ``fallbacks``, and
    it returns None. ``calls`` and ``fallbacks`` count for the process (the recall handler
    publishes the fallbacks as a metric).
    """

    provider: str
    model: str
    # The setting of the API key (a secret) it is built with, if it holds one: the service lets go
    # of such a provider with the cached secrets (before a SnapStart snapshot) and builds it again.
    api_key_setting: str | None = None

    def __init__(self) -> None:
        self.calls = 0
        self.fallbacks = 0
        self._lock = threading.Lock()

    @property
    def fingerprint(self) -> str:
        return f"{self.provider}:{self.model}"

    def scores(self, query: str, documents: Sequence[str]) -> list[float] | None:
        """One score per document (higher is more relevant, same order), or None on failure."""
        if not documents:
            return []
        started = time.perf_counter()
        with self._lock:
            self.calls += 1
        try:
            found = self._scores(query, list(documents))
            if len(found) != len(documents):
                raise ProviderError(self.provider, f"{self.model}: {len(found)} scores for {len(documents)} documents")
            return found
        except Exception as exc:  # a reranker must never fail a recall, whatever went wrong
            with self._lock:
                self.fallbacks += 1
            logger.warning(
                "rerank failed; the fused order stands",
                extra={
                    "rerank_provider": self.provider,
                    "rerank_model": self.model,
                    "error": str(exc)[:300],
                    "error_type": type(exc).__name__,
                    "ms": round((time.perf_counter() - started) * 1000, 1),
                },
                exc_info=not isinstance(exc, ProviderError),
            )
            return None

    @abstractmethod
    def _scores(self, query: str, documents: list[str]) -> list[float]:
        """The provider's scores, in document order; raises on any failure."""


def scores_by_index(results: object, count: int, *, index_key: str, score_keys: Sequence[str]) -> list[float]:
    """Scores in document order from a provider's list of ``{index, score}`` items (any order).

    A document the answer left out scores as low as the lowest it gave (it was not chosen);
    an item that is not such an object, or an index out of range, is an error.
    """
    if not isinstance(results, list):
        raise ValueError("the answer holds no list of results")
    found: dict[int, float] = {}
    for item in results:
        if not isinstance(item, dict):
            raise ValueError("a result is not an object")
        index = item.get(index_key)
        score = next((item[k] for k in score_keys if k in item), None)
        if type(index) is not int or not 0 <= index < count:
            raise ValueError(f"a result's {index_key} is not a document index: {index!r}")
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise ValueError(f"result {index} has no numeric score")
        found[index] = float(score)
    if not found:
        raise ValueError("the answer scored no document")
    lowest = min(found.values())
    return [found.get(i, lowest) for i in range(count)]
