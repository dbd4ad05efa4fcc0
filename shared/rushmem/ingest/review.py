"""Which writes wait for review (RUSHMEM_REVIEW_WRITES): a fact the injection detector marks,
one that still holds personal data once redaction ran (its placeholders hold none), or any fact
from a source the deployment does not trust. Pure: the detectors are passed in."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rushmem import poison
from rushmem.privacy import PiiDetector, detect_pii
from rushmem_contract.models import NewMemory

UNTRUSTED = "untrusted_source"
# Every conversation (queue or HTTP), whatever its id: how a deployment names them all.
CONVERSATION = "conversation"


def review_reasons(
    memory: NewMemory,
    *,
    source: str | None,
    untrusted: Collection[str],
    detectors: Sequence[PiiDetector],
    conversation: bool = False,
) -> list[str]:
    """Why ``memory`` (as it would be stored) must wait for a person; empty: it need not."""
    reasons = [f"injection:{mark}" for mark in poison.reasons(memory.content)]
    reasons += sorted({f"pii:{f.type}" for f in detect_pii(memory.content, detectors)})
    if (source is not None and source in untrusted) or (conversation and CONVERSATION in untrusted):
        reasons.append(UNTRUSTED)
    return reasons
