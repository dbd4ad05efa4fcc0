"""The extractor interface: the last messages of a conversation in, memory records out."""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field

from agent_memory.models import CATEGORIES, Category, ChatMessage, Content, NewMemory


def _category(value: Any) -> Any:
    """Case and spacing don't matter; a category outside the list becomes 'other' (the fact is kept)."""
    if isinstance(value, str):
        name = value.strip().lower()
        return name if name in CATEGORIES else "other"
    return value


class ExtractedMemory(BaseModel):
    """One memory record as an extractor returns it: ``{content, category, is_evergreen}``."""

    model_config = ConfigDict(extra="ignore")

    content: Content = Field(validation_alias=AliasChoices("content", "memory", "fact", "text"))
    category: Annotated[Category, BeforeValidator(_category)] = "fact"
    is_evergreen: bool = Field(default=False, validation_alias=AliasChoices("is_evergreen", "evergreen"))

    def to_new_memory(self, extracted_by: str) -> NewMemory:
        return NewMemory(
            content=self.content,
            category=self.category,
            is_evergreen=self.is_evergreen,
            metadata={"extracted_by": extracted_by},
        )


class Extraction(BaseModel):
    """What an extractor kept, and why it dropped the rest (one reason per dropped item)."""

    memories: list[ExtractedMemory] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)


class Extractor(ABC):
    """Turns the last ``window`` messages of a conversation into memory records.

    Subclasses implement :meth:`_extract`; this class picks the window and enforces the caps
    (count and length) whatever the provider returned.
    """

    provider: str
    model: str

    def __init__(self, *, window: int = 10, max_items: int = 20, max_chars: int = 2000) -> None:
        self.window = window
        self.max_items = max_items
        self.max_chars = max_chars

    @property
    def fingerprint(self) -> str:
        return f"{self.provider}:{self.model}"

    def extract(self, messages: Sequence[ChatMessage], *, ended_at: dt.datetime | None = None) -> Extraction:
        """Memories worth keeping from the last ``window`` messages (none if they are all empty)."""
        recent = list(messages)[-self.window :]
        if not any(m.content.strip() for m in recent):
            return Extraction()
        return self._extract(recent, ended_at)

    @abstractmethod
    def _extract(self, messages: list[ChatMessage], ended_at: dt.datetime | None) -> Extraction:
        """Extract from exactly these messages (oldest first)."""


class LLMExtractor(Extractor):
    """An extractor that asks a chat model (the prompt module's prompt) and parses its answer."""

    def _extract(self, messages: list[ChatMessage], ended_at: dt.datetime | None) -> Extraction:
        from agent_memory.errors import ProviderError
        from agent_memory.extraction.parsing import UnparseableOutput, parse_memories
        from agent_memory.extraction.prompt import build_prompt

        system, user = build_prompt(messages, max_items=self.max_items, ended_at=ended_at)
        answer = self._complete(system, user)
        try:
            return parse_memories(answer, max_items=self.max_items, max_chars=self.max_chars)
        except UnparseableOutput as exc:
            # Retryable: another attempt (the record's redelivery) may well answer properly.
            raise ProviderError(
                f"{self.provider} extraction", f"{self.model} gave no usable answer: {exc}", retryable=True
            ) from exc

    @abstractmethod
    def _complete(self, system: str, user: str) -> str:
        """The model's text answer to one system + user prompt."""
