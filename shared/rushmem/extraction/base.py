"""The extractor interface: the last messages of a conversation in, memory records out."""

from __future__ import annotations

import datetime as dt
import inspect
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from rushmem.extraction.instructions import apply_categories
from rushmem.extraction.records import Extraction, bound_expiry
from rushmem.records import ExistingMemory
from rushmem_contract.instructions import ExtractionInstructions
from rushmem_contract.models import ChatMessage


class Extractor(ABC):
    """Turns the last ``window`` messages of a conversation into memory records.

    A provider implements :meth:`_extract`; this class picks the window, maps the project's
    categories and bounds the expiries whatever the provider returned.
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
        project's (see :mod:`rushmem_contract.instructions`); a memory the provider put in one of the
        project's categories is stored as it says, whether the provider read the prose or not.
        """
        recent = list(messages)[-self.window :]
        if not any(m.content.strip() for m in recent):
            return Extraction()
        shown = existing if self.updates_existing else ()
        if instructions is not None and instructions.empty:
            instructions = None
        extraction = self._extract(recent, ended_at, shown, instructions)
        extraction = apply_categories(extraction, instructions)
        bound_expiry(extraction, ended_at or dt.datetime.now(dt.UTC))
        return extraction

    @abstractmethod
    def _extract(
        self,
        messages: list[ChatMessage],
        ended_at: dt.datetime | None,
        existing: Sequence[ExistingMemory],
        instructions: ExtractionInstructions | None,
    ) -> Extraction:
        """Extract from exactly these messages (oldest first), shown ``existing`` (empty unless
        ``updates_existing``), following the project's ``instructions`` (None: it has none)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A plug-in written against an earlier hook (``_extract`` without the instructions) fails
        # here, when its class is defined, rather than at its first conversation.
        super().__init_subclass__(**kwargs)
        hook = vars(cls).get("_extract")
        try:
            if hook is not None:
                inspect.signature(hook).bind(cls, None, None, None, None)
        except TypeError:
            raise TypeError(
                f"{cls.__qualname__}: an extractor implements _extract(messages, ended_at, existing, instructions)"
            ) from None
