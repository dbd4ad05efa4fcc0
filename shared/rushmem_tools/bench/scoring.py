"""LoCoMo recall@k, by exactly the rules of ``../shared/bench/locomo_score.py``.

A query is a hit ("any") when one of the first k memories cites one of its evidence
turns, and a full hit ("all") when they cite all of them (so a query without evidence
is always a full hit and never a hit). A memory (a mapping, as in the scorer's RESULTS
lines) cites the turns in its ``metadata["evidence"]`` (a list, or a single value).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def cited(memories: Iterable[Mapping[str, Any]]) -> set[Any]:
    """Every evidence turn the given memories cite."""
    got: set[Any] = set()
    for memory in memories:
        evidence = (memory.get("metadata") or {}).get("evidence") or []
        got.update(evidence if isinstance(evidence, list) else [evidence])
    return got


@dataclasses.dataclass(frozen=True)
class Judged:
    """A question with its evidence turns and category."""

    user_id: str
    evidence: Sequence[Any]
    category: Any = None


@dataclasses.dataclass
class Score:
    n: int = 0
    hits_any: int = 0
    hits_all: int = 0

    @property
    def any(self) -> float:
        return self.hits_any / self.n if self.n else 0.0

    @property
    def all(self) -> float:
        return self.hits_all / self.n if self.n else 0.0


@dataclasses.dataclass
class Report:
    total: Score
    by_category: dict[Any, Score]


def score(questions: Sequence[Judged], results: Sequence[Sequence[Mapping[str, Any]]], k: int = 10) -> Report:
    """recall@k over all questions and per category; ``results[i]`` are the memories
    returned for ``questions[i]``, best first."""
    if len(questions) != len(results):
        raise ValueError(f"{len(questions)} queries but {len(results)} results")
    total = Score()
    by_category: dict[Any, Score] = {}
    for question, memories in zip(questions, results, strict=True):
        evidence = set(question.evidence)
        got = cited(memories[:k])
        for bucket in (total, by_category.setdefault(question.category, Score())):
            bucket.n += 1
            bucket.hits_any += bool(evidence & got)
            bucket.hits_all += evidence <= got
    return Report(total=total, by_category=dict(sorted(by_category.items(), key=lambda kv: str(kv[0]))))


def ceiling(questions: Sequence[Judged], memories: Iterable[Mapping[str, Any]]) -> float:
    """Share of questions whose evidence any stored memory of their user cites at all
    (each memory a mapping with "user_id" and "metadata", as in memories.jsonl)."""
    cover: dict[str, set[Any]] = {}
    for memory in memories:
        cover.setdefault(memory["user_id"], set()).update(cited([memory]))
    if not questions:
        return 0.0
    found = sum(bool(set(q.evidence) & cover.get(q.user_id, set())) for q in questions)
    return found / len(questions)
