"""pydantic models shared by the CLI, the handlers and the service."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, model_validator

Category = Literal["identity", "preference", "project", "decision", "fact", "other"]
CATEGORIES: tuple[str, ...] = ("identity", "preference", "project", "decision", "fact", "other")

# Hard ceilings of the wire format; the configurable (smaller) limits live in Settings.
MAX_ID_CHARS = 256
MAX_CONTENT_CHARS = 20_000

UserId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ID_CHARS)]
ProjectId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ID_CHARS)]
Content = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_CONTENT_CHARS)]


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    """Naive timestamps are taken as UTC so comparisons never mix the two kinds."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


AwareDatetime = Annotated[dt.datetime, AfterValidator(_aware)]


class NewMemory(BaseModel):
    """A fact to store, as given by a client, the importer or the extractor."""

    model_config = ConfigDict(extra="ignore")

    content: Content
    category: Category = "fact"
    is_evergreen: bool = False
    project_id: ProjectId | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: AwareDatetime | None = None
    expires_at: AwareDatetime | None = None


class ImportLine(NewMemory):
    """One line of `agent-memory import`: a memory plus its owner."""

    user_id: UserId


class Memory(BaseModel):
    """A stored memory as returned by list/recall."""

    id: uuid.UUID
    user_id: str
    project_id: str | None
    content: str
    category: str
    source: str | None = None
    is_evergreen: bool
    created_at: dt.datetime
    updated_at: dt.datetime
    expires_at: dt.datetime | None = None
    superseded_by: uuid.UUID | None = None
    superseded_at: dt.datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class RecalledMemory(BaseModel):
    """The public shape of one recalled memory (CLI and API alike)."""

    id: uuid.UUID
    content: str
    category: str
    score: float
    created_at: dt.datetime
    is_evergreen: bool
    project_id: str | None
    metadata: dict[str, Any] = Field(default_factory=dict)


class RecallResult(BaseModel):
    memories: list[RecalledMemory]
    prompt_block: str
    query: str


class StoredIds(BaseModel):
    """What a write returns: the ids in input order, and which of them were new rows."""

    ids: list[uuid.UUID]
    created: int
    refreshed: int


class MemoryEvent(BaseModel):
    """One recorded change of a memory (its history)."""

    memory_id: uuid.UUID
    event: Literal["created", "refreshed", "superseded", "revived", "expiry_changed", "deleted", "expired", "purged"]
    at: dt.datetime
    source: str | None = None
    content: str
    related_id: uuid.UUID | None = None
    project_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class ChatMessage(BaseModel):
    """One chat turn, as the chat application sends it."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant", "system", "tool"]
    content: Annotated[str, StringConstraints(max_length=MAX_CONTENT_CHARS)]
    created_at: AwareDatetime | None = None


class ConversationEnded(BaseModel):
    """The write-path message (SQS body) the chat application sends when a conversation ends.

    Either ``messages`` (extracted by the configured LLM provider) or ``memories`` (facts the
    client extracted itself, stored as given), or both. Unknown fields are ignored.
    """

    model_config = ConfigDict(extra="ignore")

    user_id: UserId
    project_id: ProjectId | None = None
    conversation_id: Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_ID_CHARS)] | None = None
    ended_at: AwareDatetime | None = None
    messages: list[ChatMessage] = Field(default_factory=list)
    memories: list[NewMemory] = Field(default_factory=list)

    @model_validator(mode="after")
    def _something_to_remember(self) -> ConversationEnded:
        if not self.messages and not self.memories:
            raise ValueError("the message needs 'messages' or 'memories' (both are empty or missing)")
        return self
