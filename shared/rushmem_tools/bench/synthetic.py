"""Synthetic memories and queries for the latency and ingest benchmarks.

Deterministic for a seed. Each user has a few topic words that most of their memories
and queries use, so both recall legs find matches (as with real users, whose memories
share subjects); the rest of each sentence comes from a large Zipf-distributed
vocabulary of made-up words. Sentences are about as long as LoCoMo's memories (~100 chars).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from collections.abc import Iterator

import numpy as np

from rushmem.embeddings.base import Embedder, Vectors, normalize_rows
from rushmem.records import MemoryRow
from rushmem_contract.models import content_hash

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_TEMPLATES = (
    "The user prefers {0} {1} for the {2} {3} and keeps {4} {5} in mind.",
    "For the {0} project the team decided to use {1} {2} with {3} {4} {5}.",
    "The user said that {0} {1} must always be synced with the {2} {3} {4} {5}.",
    "Last week the user moved the {0} {1} to {2} because the {3} {4} was {5}.",
    "The user works on {0} {1} and asked to avoid {2} {3} near the {4} {5}.",
    "Remember that the {0} {1} of the user depends on {2} {3} and {4} {5}.",
)
_QUESTIONS = (
    "What does the user want for the {0} {1} and {2}?",
    "How should I handle {0} {1} in the {2} work?",
    "Which {0} did we choose for {1} {2}?",
    "Remind me about {0} {1} and the {2}.",
)
WORDS_PER_MEMORY = 6
TOPIC_WORDS = 24
TOPIC_SHARE = 0.5  # share of a memory's words taken from its user's topics


def vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    """``size`` distinct pronounceable made-up words (2 to 4 syllables)."""
    syllables = [c + v for c in _CONSONANTS for v in _VOWELS]
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(2, 5))
        words.add("".join(syllables[int(i)] for i in rng.integers(0, len(syllables), n)))
    return sorted(words)


@dataclasses.dataclass(frozen=True)
class Fact:
    user_id: str
    content: str
    created_at: dt.datetime


class SyntheticCorpus:
    """``memories`` facts spread evenly over ``users`` users, and queries for them."""

    def __init__(
        self, memories: int, users: int, *, seed: int = 7, vocabulary_size: int = 20_000, now: dt.datetime | None = None
    ) -> None:
        if memories < 1 or users < 1:
            raise ValueError("need at least one memory and one user")
        self.memories = memories
        self.users = min(users, memories)
        self.seed = seed
        self.now = now or dt.datetime.now(dt.UTC).replace(microsecond=0)
        rng = np.random.default_rng(seed)
        self.words = vocabulary(vocabulary_size, rng)
        # Zipf-like frequencies: a few common words, a long tail.
        ranks = np.arange(1, len(self.words) + 1, dtype=np.float64)
        self._cdf = np.cumsum(1.0 / ranks) / (1.0 / ranks).sum()
        self._topics = rng.integers(0, len(self.words), size=(self.users, TOPIC_WORDS))

    def user_id(self, index: int) -> str:
        return f"user-{index:06d}"

    def facts(self) -> Iterator[Fact]:
        """Every memory once, round-robin over users; unique per user."""
        rng = np.random.default_rng(self.seed + 1)
        seen: set[bytes] = set()
        for i in range(self.memories):
            user = i % self.users
            while True:
                content = self._sentence(rng, user, _TEMPLATES, WORDS_PER_MEMORY)
                key = self.user_id(user).encode() + content_hash(content)
                if key not in seen:
                    seen.add(key)
                    break
            age = dt.timedelta(seconds=float(rng.uniform(0, 730 * 86400)))
            yield Fact(self.user_id(user), content, self.now - age)

    def queries(self, count: int, *, seed_offset: int = 2) -> list[tuple[str, str]]:
        """(user_id, question) pairs for random users."""
        rng = np.random.default_rng(self.seed + seed_offset)
        out = []
        for _ in range(count):
            user = int(rng.integers(0, self.users))
            out.append((self.user_id(user), self._sentence(rng, user, _QUESTIONS, 3)))
        return out

    def _sentence(self, rng: np.random.Generator, user: int, templates: tuple[str, ...], words: int) -> str:
        topical = rng.random(words) < TOPIC_SHARE
        topic_pick = self._topics[user, rng.integers(0, TOPIC_WORDS, words)]
        zipf_pick = np.minimum(np.searchsorted(self._cdf, rng.random(words)), len(self.words) - 1)
        picked = [self.words[int(i)] for i in np.where(topical, topic_pick, zipf_pick)]
        return templates[int(rng.integers(0, len(templates)))].format(*picked)


def memory_rows(facts: Iterator[Fact], embedder: Embedder, *, chunk: int = 2048) -> Iterator[MemoryRow]:
    """Facts as rows ready for COPY, embedded ``chunk`` at a time."""
    while True:
        batch = list(itertools.islice(facts, chunk))
        if not batch:
            return
        vectors = embedder.embed([f.content for f in batch])
        for fact, vector in zip(batch, vectors, strict=True):
            yield MemoryRow(
                user_id=fact.user_id,
                project_id=None,
                content=fact.content,
                content_hash=content_hash(fact.content),
                category="fact",
                embedding=vector,
                source="bench",
                created_at=fact.created_at,
                observed_at=fact.created_at,
            )


class RandomEmbedder(Embedder):
    """Random unit vectors (seeded by the text): no structure at all, the hardest case for HNSW."""

    provider = "random"
    model = "random-unit"

    def __init__(self, dimension: int = 384) -> None:
        self.dimension = dimension
        self.batch_size = 4096

    def _embed_batch(self, texts: list[str]) -> Vectors:
        rows = [
            np.random.default_rng(int.from_bytes(content_hash(t)[:8], "little")).standard_normal(self.dimension)
            for t in texts
        ]
        return normalize_rows(np.asarray(rows, dtype=np.float32))
