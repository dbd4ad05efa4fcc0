"""The extractor interface: the last messages of a conversation in, memory records out."""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Sequence

from rushmem.extraction.instructions import apply_categories
from rushmem.extraction.records import Extraction, bound_expiry
from rushmem.records import ExistingMemory
from rushmem_contract.instructions import ExtractionInstructions
from rushmem_contract.models import ChatMessage


class Extractor(ABC):
    """Turns the last ``window`` messages of a conversation into memory records.

    Subclasses implement :meth:`_extract`; this class picks the window and enforces the caps
    (count and length) whatever the provider returned.
    """

    provider: str
    model: str
    # Whether it can be shown existing memories and mark restatements and replacements.
    updates_existing: bool = False
    # The setting of the API key (a secret) it is built with, if it holds one: the service lets go
    # of such a provider with the cached secrets (before a SnapStart snapshot) and builds it again.
    api_key_setting: str | None = None

    def __init__(self, *, window: int = 10, max_items: int = 20, max_chars: int = 2000) -> None:
        self.window = window
        self.max_items = max_items
        self.max_chars = max_chars

    @property
    def fingerprint(self) -> str:
        return f"{self.provider}:{self.model}"

    def extract(
        self,
        messages: Sequence[ChatMessage],
        *,
        ended_at: dt.datetime | None = None,
        existing: Sequence[ExistingMemory] = (),
        instructions: ExtractionInstructions | None = None,
    ) -> Extraction:
        """Memories worth keeping from the last ``window`` messages (none if they are all empty).

        ``existing``: related stored memories to show (only extractors with ``updates_existing``
        use them). Expiries are checked against ``ended_at`` (else now). ``instructions``: the
        project's (see :mod:`rushmem_contract.instructions`); an extractor that cannot read
        them (one that only implements :meth:`_extract`) still gets the project's categories mapped.
        """
        recent = list(messages)[-self.window :]
        if not any(m.content.strip() for m in recent):
            return Extraction()
        shown = existing if self.updates_existing else ()
        if instructions is not None and instructions.empty:
            instructions = None
        extraction = self._extract_with(recent, ended_at, shown, instructions)
        extraction = apply_categories(extraction, instructions)
        bound_expiry(extraction, ended_at or dt.datetime.now(dt.UTC))
        return extraction

    def _extract_with(
        self,
        messages: list[ChatMessage],
        ended_at: dt.datetime | None,
        existing: Sequence[ExistingMemory],
        instructions: ExtractionInstructions | None,
    ) -> Extraction:
        """As :meth:`_extract`, with the project's instructions; the built-in extractors override this
        (a provider registered before instructions existed keeps working through :meth:`_extract`)."""
        return self._extract(messages, ended_at, existing)

    @abstractmethod
    def _extract(
        self, messages: list[ChatMessage], ended_at: dt.datetime | None, existing: Sequence[ExistingMemory]
    ) -> Extraction:
        """Extract from exactly these messages (oldest first)."""
