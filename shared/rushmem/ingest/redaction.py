"""Personal data out of memories before they are embedded: the one redaction step of every write
(``AGENT_MEMORY_PII``), on the content and on every key and string value of the metadata. What it
does and why, and what a redacted memory records (``pii_redacted``): docs/tenant-data.md.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar

from rushmem.privacy import PiiDetector, PiiPolicy, RegexDetector, redact_many
from rushmem_contract.inputs import field_path
from rushmem_contract.models import REDACTED_KEY, NewMemory, own_metadata

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
    """Applies the policy with its detectors (the regex engine, and Comprehend when configured: see
    :func:`rushmem.providers.comprehend.pii_detectors`)."""

    def __init__(self, policy: PiiPolicy, detectors: Sequence[PiiDetector] | None = None) -> None:
        self.policy = policy
        self.detectors: list[PiiDetector] = list(detectors) if detectors is not None else [RegexDetector()]

    @property
    def enabled(self) -> bool:
        return self.policy.enabled

    def apply(self, memories: Sequence[M]) -> Redacted[M]:
        """``memories`` with personal data replaced or dropped, as the policy says: in the content
        and in every string value of the metadata (all the texts of one write go to the
        detectors together: one Comprehend request for a conversation's facts)."""
        if not self.enabled or not memories:
            return Redacted(list(memories), list(range(len(memories))))
        outcomes = self._redact([(m.content, own_metadata(m.metadata)) for m in memories])
        kept: list[M] = []
        positions: list[int | None] = []
        redacted = dropped = 0
        for memory, outcome in zip(memories, outcomes, strict=True):
            if outcome.dropped:
                dropped += 1
                positions.append(None)
                logger.info("memory dropped for personal data", extra={"pii_types": sorted(outcome.removed)})
                continue
            metadata = dict(outcome.metadata or {})
            if outcome.removed:
                redacted += 1
                # Validated again (the text and the metadata values are normalised and checked like
                # any memory's); the record is set after, since the models drop a writer's value under
                # REDACTED_KEY.
                memory = memory.model_validate(
                    {**memory.model_dump(), "content": outcome.content, "metadata": metadata}
                )
                memory = memory.model_copy(
                    update={"metadata": {**memory.metadata, REDACTED_KEY: dict(outcome.removed)}}
                )
            elif REDACTED_KEY in memory.metadata:
                memory = memory.model_copy(update={"metadata": metadata})
            positions.append(len(kept))
            kept.append(memory)
        return Redacted(kept, positions, redacted, dropped)

    def redact_change(self, content: str | None, metadata: dict[str, Any] | None) -> RedactedFields:
        """A change of one memory (either part may be left out: None) through the same policy."""
        if not self.enabled:
            return RedactedFields(content, metadata)
        (outcome,) = self._redact([(content, None if metadata is None else own_metadata(metadata))])
        return outcome

    def _redact(self, memories: Sequence[tuple[str | None, dict[str, Any] | None]]) -> list[RedactedFields]:
        texts: list[str] = []
        # (memory, metadata path (None: the content), whether the text is the key at that path)
        owners: list[tuple[int, tuple[str | int, ...] | None, bool]] = []
        for i, (content, metadata) in enumerate(memories):
            if content is not None:
                texts.append(content)
                owners.append((i, None, False))
            for where, value, is_key in _strings(metadata or {}):
                if value.strip():
                    texts.append(value)
                    owners.append((i, where, is_key))
        results = redact_many(texts, self.policy, detectors=self.detectors) if texts else []
        outcomes = [RedactedFields(content, metadata) for content, metadata in memories]
        removed: list[Counter[str]] = [Counter() for _ in memories]
        renames: list[list[tuple[tuple[str | int, ...], str]]] = [[] for _ in memories]
        values: list[list[tuple[tuple[str | int, ...], str]]] = [[] for _ in memories]
        for (i, path, is_key), result in zip(owners, results, strict=True):
            outcome = outcomes[i]
            removed[i].update(result.removed)
            if result.dropped:
                field = "content" if path is None else field_path(("metadata", *path))
                outcomes[i] = dataclasses.replace(outcome, dropped=True, dropped_field=outcome.dropped_field or field)
            elif result.changed:
                if path is None:
                    outcomes[i] = dataclasses.replace(outcome, content=result.text)
                else:
                    (renames if is_key else values)[i].append((path, result.text))
        for i in range(len(memories)):
            if values[i] or renames[i]:
                metadata = _changed(outcomes[i].metadata or {}, values[i], renames[i])
                outcomes[i] = dataclasses.replace(outcomes[i], metadata=metadata)
        return [dataclasses.replace(o, removed=dict(sorted(r.items()))) for o, r in zip(outcomes, removed, strict=True)]


@dataclasses.dataclass(frozen=True)
class RedactedFields:
    """One memory's content and metadata after redaction (None: not given), what was removed
    from them by type, and whether the policy drops the memory (``dropped_field``: where)."""

    content: str | None
    metadata: dict[str, Any] | None
    removed: dict[str, int] = dataclasses.field(default_factory=dict)
    dropped: bool = False
    dropped_field: str | None = None


def _strings(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str, bool]]:
    """Every string inside ``value`` with its path and whether it is a key (the key at that
    path) or a value; the models bound the depth."""
    if isinstance(value, str):
        yield path, value, False
    elif isinstance(value, dict):
        for key, child in value.items():
            yield (*path, key), key, True
            yield from _strings(child, (*path, key))
    elif isinstance(value, list | tuple):
        for index, child in enumerate(value):
            yield from _strings(child, (*path, index))


def _changed(
    metadata: dict[str, Any],
    values: Sequence[tuple[tuple[str | int, ...], str]],
    renames: Sequence[tuple[tuple[str | int, ...], str]],
) -> dict[str, Any]:
    """A copy of ``metadata`` with the strings at the ``values`` paths replaced and the keys at the
    ``renames`` paths renamed (numbered when their object already has that name, in the same place
    among their siblings): one copy, each object rebuilt once, so the time is linear in the
    metadata (a copy per change made metadata full of e-mail addresses quadratic)."""
    out: dict[str, Any] = copy.deepcopy(metadata)
    for path, text in values:
        _at(out, path[:-1])[path[-1]] = text
    by_parent: dict[tuple[str | int, ...], dict[str | int, str]] = {}
    for path, key in renames:
        by_parent.setdefault(path[:-1], {})[path[-1]] = key
    # Deepest first: renaming a key changes the paths below it, never those above.
    for parent_path in sorted(by_parent, key=len, reverse=True):
        parent = _at(out, parent_path)
        wanted = by_parent[parent_path]
        taken = set(parent)
        rebuilt: dict[str, Any] = {}
        for old, child in parent.items():
            name = old
            if old in wanted:
                taken.discard(old)
                name, n = wanted[old], 1
                while name in taken:
                    n += 1
                    name = f"{wanted[old]} {n}"
                taken.add(name)
            rebuilt[name] = child
        parent.clear()
        parent.update(rebuilt)
    return out


def _at(value: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        value = value[step]
    return value
