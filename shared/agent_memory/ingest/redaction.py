"""Personal data out of memories before they are embedded: the one redaction step of every write.

API writes, the SQS message's own memories, extracted facts and imported lines all pass here
between validation and embedding (``AGENT_MEMORY_PII``), so neither the stored text, its history
nor its vector ever holds a removed value. A redacted memory keeps typed placeholders
("[EMAIL]") and records what was removed in its metadata under ``pii_redacted`` (counts by type,
never values); in ``drop`` mode a memory holding such data is not stored at all.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Generic, TypeVar

from agent_memory.config import Settings
from agent_memory.privacy import PiiDetector, PiiPolicy, RegexDetector, redact_many
from agent_memory.privacy.detectors import COMPREHEND_ENTITY_TYPES
from agent_memory_contract.models import REDACTED_KEY, NewMemory

logger = logging.getLogger(__name__)

__all__ = ["REDACTED_KEY", "Redacted", "Redactor"]

M = TypeVar("M", bound=NewMemory)


@dataclasses.dataclass(frozen=True)
class Redacted(Generic[M]):
    """The memories to store (redacted where needed), and, per input memory, its index among them
    (None: dropped for personal data)."""

    memories: list[M]
    positions: list[int | None]
    redacted: int = 0  # memories stored with placeholders
    dropped: int = 0  # memories not stored

    @property
    def dropped_positions(self) -> list[int]:
        return [i for i, p in enumerate(self.positions) if p is None]


class Redactor:
    """Applies the policy with its detectors (the regex engine, and Comprehend when configured)."""

    def __init__(self, policy: PiiPolicy, detectors: Sequence[PiiDetector] | None = None) -> None:
        self.policy = policy
        self.detectors: list[PiiDetector] = list(detectors) if detectors is not None else [RegexDetector()]

    @classmethod
    def from_settings(cls, settings: Settings) -> Redactor:
        detectors: list[PiiDetector] = [RegexDetector()]
        # Comprehend is billed per character: only when a category it finds is acted on (credentials
        # alone, the default, are the regex engine's).
        if settings.pii_comprehend and any(
            settings.pii.mode_for(COMPREHEND_ENTITY_TYPES[name][1]) != "off" for name in settings.pii_comprehend_types
        ):
            from agent_memory.providers.comprehend import ComprehendPiiDetector

            detectors.append(ComprehendPiiDetector.from_settings(settings))
        return cls(settings.pii, detectors)

    @property
    def enabled(self) -> bool:
        return self.policy.enabled

    def apply(self, memories: Sequence[M]) -> Redacted[M]:
        """``memories`` with personal data replaced or dropped, as the policy says (all the texts of
        one write go to the detectors together: one Comprehend request for a conversation's facts)."""
        if not self.enabled or not memories:
            return Redacted(list(memories), list(range(len(memories))))
        results = redact_many([m.content for m in memories], self.policy, detectors=self.detectors)
        kept: list[M] = []
        positions: list[int | None] = []
        redacted = dropped = 0
        for memory, result in zip(memories, results, strict=True):
            metadata = {k: v for k, v in memory.metadata.items() if k != REDACTED_KEY}
            if result.dropped:
                dropped += 1
                positions.append(None)
                logger.info("memory dropped for personal data", extra={"pii_types": sorted(result.removed)})
                continue
            if result.changed:
                redacted += 1
                metadata[REDACTED_KEY] = dict(result.removed)
                # Validated again: the text is normalised and checked like any memory's; the record
                # is set after, since the models drop a writer's value under REDACTED_KEY.
                memory = memory.model_validate({**memory.model_dump(), "content": result.text})
                memory = memory.model_copy(update={"metadata": metadata})
            elif REDACTED_KEY in memory.metadata:
                memory = memory.model_copy(update={"metadata": metadata})
            positions.append(len(kept))
            kept.append(memory)
        return Redacted(kept, positions, redacted, dropped)
