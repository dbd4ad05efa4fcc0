"""What every LLM extractor shares: the prompt (:mod:`.prompt`), the tolerant parsing of the answer
(:mod:`.parsing`) and the options mapped from the settings; a provider only sends the prompt."""

from __future__ import annotations

import datetime as dt
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, TypedDict

from rushmem.config import Settings
from rushmem.extraction.base import Extractor
from rushmem.extraction.parsing import UnparseableOutput, parse_memories
from rushmem.extraction.prompt import build_prompt
from rushmem.extraction.records import Extraction, place_in_conversation
from rushmem.records import ExistingMemory
from rushmem.usage import record_usage
from rushmem_contract.errors import ProviderError
from rushmem_contract.instructions import ExtractionInstructions
from rushmem_contract.models import ChatMessage


class LLMOptions(TypedDict, total=False):
    """What every LLM extractor takes besides its client and model (see :class:`LLMExtractor`)."""

    temperature: float
    max_tokens: int
    window: int
    max_items: int
    max_chars: int


def llm_options(settings: Settings) -> LLMOptions:
    """The LLM extractor options from the settings (one mapping for every provider)."""
    return LLMOptions(
        temperature=settings.llm_temperature,
        max_tokens=settings.llm_max_tokens,
        window=settings.extraction_window,
        max_items=settings.max_extracted_memories,
        max_chars=settings.max_memory_chars,
    )


class LLMExtractor(Extractor):
    """An extractor that asks a chat model (the prompt module's prompt) and parses its answer."""

    updates_existing = True

    def __init__(self, model: str, *, temperature: float = 0.0, max_tokens: int = 1024, **limits: int) -> None:
        super().__init__(**limits)  # window, max_items, max_chars
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens

    def _extract(
        self,
        messages: list[ChatMessage],
        ended_at: dt.datetime | None,
        existing: Sequence[ExistingMemory],
        instructions: ExtractionInstructions | None,
    ) -> Extraction:
        system, user = build_prompt(
            messages, max_items=self.max_items, ended_at=ended_at, existing=existing, instructions=instructions
        )
        answer = self._complete(system, user)
        try:
            extraction = parse_memories(answer, max_items=self.max_items, max_chars=self.max_chars)
        except UnparseableOutput as exc:
            # A provider failure, not bad input: the record's redelivery asks again and may well get an answer.
            raise ProviderError(f"{self.provider} extraction", f"{self.model} gave no usable answer: {exc}") from exc
        return place_in_conversation(extraction, messages)

    @abstractmethod
    def _complete(self, system: str, user: str) -> str:
        """The model's text answer to one system + user prompt."""

    def _record_call(self, system: str, user: str, *, input_tokens: Any, output_tokens: Any) -> None:
        """Count one call to the model, with its token counts as the provider reported them."""
        record_usage(
            "llm",
            self.fingerprint,
            calls=1,
            input_tokens=_count(input_tokens),
            output_tokens=_count(output_tokens),
            characters=len(system) + len(user),
        )


def _count(value: Any) -> int:
    """A token count as the provider reported it; 0 when it reported none."""
    return value if isinstance(value, int) and value > 0 else 0
