"""The recall plan: how a recall finds and ranks its candidates, built once from the settings and
passed unchanged to the candidate query (its k, the date leg) and to the ranking.

Only what a deployer tunes comes from the settings (the decay, the reranker's share and count);
the rest are the defaults measured on the dev split (BENCHMARKS.md), which the benchmarks vary
with :meth:`RecallPlan.but`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any, Literal

from rushmem.config import Settings
from rushmem.recall import dates
from rushmem.records import Window

Legs = Literal["hybrid", "vector", "text"]


@dataclasses.dataclass(frozen=True, slots=True)
class RecallPlan:
    """Every choice of one recall but the query, its scope and its limit."""

    # Which legs rank: both (fused), or one alone (the benchmarks' baselines).
    legs: Legs = "hybrid"
    # Weighted fusion: cosine similarity and the max-normalised full-text rank.
    vector_weight: float = 0.7
    text_weight: float = 0.3
    # Candidates per leg = overfetch x limit.
    overfetch: int = 3
    # Time decay: relevance x (floor + (1 - floor) x 0.5^(age / half-life)).
    decay: bool = True
    half_life_days: float = 180.0
    decay_floor: float = 0.9
    mmr: bool = True
    mmr_lambda: float = 0.8
    # A query's dates: +date_boost for memories stated inside a window it names, and the date leg
    # fetches up to date_k of them (0: off). date_ranges: years, seasons and "N ... ago" are
    # windows too (named days and months always are).
    date_boost: float = 0.2
    date_k: int = 10
    date_ranges: bool = True
    # One hop: a candidate stated at the same instant as one of the hop_seeds most relevant (written
    # together) gains hop_boost x that seed's relevance.
    hop_seeds: int = 3
    hop_boost: float = 0.1
    # The reranker, when one is configured and rerank is on (see ranking._reranked).
    rerank: bool = True
    rerank_top_n: int = 30
    rerank_weight: float = 0.7
    # The relevance cut after ranking: leave out what scores below this share of the best memory's
    # score (0: fill the limit, as the article does). Chosen on the dev split (docs/recall-quality.md).
    min_relative_score: float = 0.6

    @classmethod
    def from_settings(cls, settings: Settings) -> RecallPlan:
        return cls(
            half_life_days=settings.half_life_days,
            decay_floor=settings.decay_floor,
            rerank_top_n=settings.rerank_top_n,
            rerank_weight=settings.rerank_weight,
            min_relative_score=settings.min_relative_score,
        )

    def but(self, **changes: Any) -> RecallPlan:
        return dataclasses.replace(self, **changes)

    def candidates_per_leg(self, limit: int) -> int:
        return self.overfetch * limit

    def windows(self, query: str, now: dt.datetime) -> tuple[Window, ...]:
        """The date windows the query names, read only when a date step is on."""
        if self.date_k <= 0 and self.date_boost <= 0:
            return ()
        return tuple(dates.query_time_windows(query, now, ranges=self.date_ranges))
