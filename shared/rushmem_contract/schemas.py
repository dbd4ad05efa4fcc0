"""The HTTP API's request and response models, and the OpenAPI descriptions of its answers.

Light on purpose (pydantic only): the Python client imports these too.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rushmem_contract import shapes
from rushmem_contract.errors import InvalidInput
from rushmem_contract.instructions import MAX_INSTRUCTION_VERSIONS
from rushmem_contract.models import (
    DEFAULT_HISTORY_PAGE,
    DEFAULT_PAGE,
    MAX_BLOCK_TOKENS,
    MAX_CONTENT_CHARS,
    MAX_CURSOR_CHARS,
    MAX_DEPENDS_ON,
    MAX_EXPLAIN_IDS,
    MAX_HISTORY,
    MAX_MESSAGES,
    MAX_PAGE,
    MAX_RECALL_LIMIT,
    MAX_SUPERSEDES,
    AwareDatetime,
    Category,
    ChatMessage,
    ClosedModel,
    Consistency,
    ConversationEnded,
    MemoryChanges,
    MemoryEvent,
    MemoryFilters,
    NewMemory,
    ProjectId,
    ReviewDecision,
    UserId,
    WireModel,
    WrittenMetadata,
)

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse


class ContentPart(WireModel):
    """One part of a multi-part chat message (OpenAI style); only text parts are read."""

    type: str = "text"
    text: str | None = None


class RecallMessage(WireModel):
    """A chat message as agent frameworks pass them around: any role, text or parts."""

    role: Annotated[str, StringConstraints(max_length=64)]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content.strip()
        parts = self.content or []
        return " ".join(p.text.strip() for p in parts if p.type == "text" and p.text and p.text.strip())


def latest_user_query(messages: Sequence[RecallMessage]) -> str | None:
    """The text of the latest user message that has text (the article's extractUserQuery)."""
    for message in reversed(messages):
        if message.role == "user" and (text := message.text()):
            return text
    return None


CONSISTENCY_HELP = (
    "Where a deployment with a reader endpoint reads: 'eventual' (the reader; it may miss a write made a "
    "moment ago: usually well under a second) or 'strong' (the writer: every committed write). Without a "
    "reader, both read the one database."
)


# Two clocks, one name each at every door and down to the SQL (rushmem.store.memories.scope).
NOW_HELP = (
    "Evaluation time (ISO 8601): recall among the memories stored by then and current then, with decay and "
    "date words measured from it (reproducible runs); omit for the present."
)
AS_OF_HELP = (
    "Valid time (ISO 8601): what was true at this time, superseded versions included while they held; "
    "omit for what is true now."
)

EXPLAIN_HELP = (
    "Also answer why: every candidate the search considered with its signals (vector similarity, text rank, "
    "date window, decay, MMR penalty, reranker score), its final score and why it was kept or dropped."
)
EXPLAIN_IDS_HELP = (
    f"Memory ids to account for (implies explain, at most {MAX_EXPLAIN_IDS}): for each, whether it was a "
    "candidate and, if not, why (another scope, superseded, expired, not yet valid, filtered out, pending review, "
    "not near enough, not found)."
)


# The fields most requests share, defined once.
CallerUser = Annotated[UserId | None, Field(description="Required without a JWT; with one, the token's sub.")]
ReadConsistency = Annotated[Consistency, Field(description=CONSISTENCY_HELP)]
PageCursor = Annotated[
    str | None, Field(max_length=MAX_CURSOR_CHARS, description="next_cursor of the previous page; omit for the first.")
]
MemoryIdField = Annotated[uuid.UUID, Field(description="The memory's id.")]


class RecallRequest(ClosedModel):
    """POST /recall. Give ``query``, or ``messages`` to recall for the latest user message."""

    user_id: CallerUser = None
    project_id: ProjectId | None = Field(default=None, description="Also recall this project's memories.")
    query: str | None = Field(default=None, description="What to recall memories for.")
    messages: list[RecallMessage] | None = Field(
        default=None, description="Chat messages; the query is the latest user message."
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        le=MAX_RECALL_LIMIT,
        description=f"Most memories to return, 1..{MAX_RECALL_LIMIT} (default: the deployment's, 10 unless set).",
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_BLOCK_TOKENS,
        description="Most tokens the prompt block may hold (counted as docs/api.md says): memories join it best "
        "first while they fit; the answer's memories are the block's. Default: no budget.",
    )
    now: AwareDatetime | None = Field(default=None, description=NOW_HELP)
    include_inactive: bool = Field(default=False, description="Also superseded and expired memories (for debugging).")
    filters: MemoryFilters | None = Field(
        default=None, description="Recall among the memories that match these only (all conditions hold)."
    )
    consistency: ReadConsistency = "eventual"
    as_of: AwareDatetime | None = Field(default=None, description=AS_OF_HELP)
    explain: bool = Field(default=False, description=EXPLAIN_HELP)
    explain_ids: list[uuid.UUID] | None = Field(default=None, max_length=MAX_EXPLAIN_IDS, description=EXPLAIN_IDS_HELP)

    def query_text(self) -> str:
        """The query to use; InvalidInput naming the field when there is none or two."""
        if self.query is not None and self.messages is not None:
            raise InvalidInput("give either query or messages, not both", field="messages")
        if self.messages is not None:
            text = latest_user_query(self.messages)
            if text is None:
                raise InvalidInput("messages has no user message with text to recall for", field="messages")
            return text
        if self.query is None:
            raise InvalidInput("query (or messages) is required", field="query")
        return self.query


class ListRequest(ClosedModel):
    """GET /memories (as query parameters; the filters flattened: categories comma-separated,
    metadata as JSON): a page of the user's memories, newest first."""

    user_id: CallerUser = None
    project_id: ProjectId | None = Field(default=None, description="Also list this project's memories.")
    limit: int = Field(default=DEFAULT_PAGE, ge=1, le=MAX_PAGE, description=f"Memories per page, 1..{MAX_PAGE}.")
    cursor: PageCursor = None
    include_inactive: bool = Field(default=False, description="Also superseded and expired memories.")
    filters: MemoryFilters | None = Field(default=None, description="Only the memories that match these.")
    consistency: ReadConsistency = "eventual"
    as_of: AwareDatetime | None = Field(default=None, description=AS_OF_HELP)


# What AddRequest's memories accept (a text is a fact's content), as its schema says.
FactText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_CONTENT_CHARS)]
FactsInput = FactText | NewMemory | list[FactText | NewMemory]


class AddRequest(ClosedModel):
    """POST /memories: store facts now (no LLM; the same rules as the write path), or, given chat
    ``messages`` (as mem0's add takes them), extract the facts worth keeping from them first.

    ``memories`` may be one string, a list of strings or of objects (:class:`NewMemory`); the
    call-wide fields (``category`` ... ``metadata``) apply to every memory that does not set its own.
    """

    user_id: CallerUser = None
    project_id: ProjectId | None = Field(default=None, description="The project the memories belong to.")
    messages: list[ChatMessage] | None = Field(
        default=None,
        max_length=MAX_MESSAGES,
        description="Chat messages instead of memories: the facts worth keeping are extracted from them.",
    )
    # Checked after messages (validate_default): "nothing to store" names this field. One text, one
    # object, or a list of either (shapes.as_facts), as its schema says.
    memories: Annotated[list[NewMemory], BeforeValidator(shapes.as_facts, json_schema_input_type=FactsInput)] = Field(
        default_factory=list,
        max_length=MAX_MESSAGES,
        validate_default=True,
        description="The facts, one short self-contained sentence each (a string, or an object with its fields); "
        "RUSHMEM_MAX_MEMORIES_PER_REQUEST at most.",
    )
    infer: bool | None = Field(
        default=None,
        description="true: extract facts from memories given as text too (each read as a user message); false: "
        "store messages' texts as they are. Default: extract from messages only.",
    )
    category: Category | None = Field(default=None, description="Category of every memory that sets none.")
    is_evergreen: bool | None = Field(default=None, description="true: the memories never fade with age in recall.")
    expires_at: AwareDatetime | None = Field(default=None, description="When the memories stop holding (ISO 8601).")
    valid_from: AwareDatetime | None = Field(
        default=None, description="When the facts became true (ISO 8601); default: when they were stated."
    )
    supersedes: list[uuid.UUID] | None = Field(
        default=None, max_length=MAX_SUPERSEDES, description=NewMemory.model_fields["supersedes"].description
    )
    depends_on: list[uuid.UUID] | None = Field(
        default=None, max_length=MAX_DEPENDS_ON, description=NewMemory.model_fields["depends_on"].description
    )
    metadata: WrittenMetadata | None = Field(
        default=None, description="Added to every memory's metadata (a memory's own keys win)."
    )

    _chat = model_validator(mode="before")(shapes.chat_in_memories)

    @field_validator("memories")
    @classmethod
    def _something_to_store(cls, value: list[NewMemory], info: ValidationInfo) -> list[NewMemory]:
        if "messages" not in info.data:  # refused already: said once, there
            return value
        messages = info.data["messages"]
        if not value and not messages:
            raise ValueError("give the memories to store (or chat messages to extract them from)")
        if value and messages:
            raise ValueError("give either memories (facts) or messages (a conversation), not both")
        return value

    def facts(self) -> list[NewMemory]:
        """The memories with the call-wide fields applied where a memory sets its own none."""
        given = {name: getattr(self, name) for name in _CALL_WIDE if getattr(self, name) is not None}
        if not given:
            return list(self.memories)
        out = []
        for memory in self.memories:
            own = memory.model_fields_set
            update = {k: v for k, v in given.items() if k not in own and k != "metadata"}
            if "metadata" in given:
                update["metadata"] = {**given["metadata"], **memory.metadata}
            out.append(memory.model_copy(update=update) if update else memory)
        return out


# AddRequest's fields that apply to every memory of the call.
_CALL_WIDE = ("category", "is_evergreen", "expires_at", "valid_from", "supersedes", "depends_on", "metadata")


class GetRequest(ClosedModel):
    """GET /memories/{memory_id}: one of the user's memories, live or not."""

    memory_id: MemoryIdField
    user_id: CallerUser = None
    consistency: ReadConsistency = "eventual"


class UpdateRequest(MemoryChanges):
    """PATCH /memories/{memory_id} (user_id in the query, the changes in the body)."""

    memory_id: MemoryIdField
    user_id: CallerUser = None

    _whole = model_validator(mode="before")(shapes.changes_given_whole)


class DeleteRequest(ClosedModel):
    """DELETE /memories/{memory_id}: forget one of the user's memories."""

    memory_id: MemoryIdField
    user_id: CallerUser = None


class HistoryRequest(ClosedModel):
    """GET /memories/{memory_id}/history: a page of one memory's recorded changes, oldest first
    (no memory_id, where a door allows it: the changes of every memory of the user)."""

    memory_id: MemoryIdField | None = None
    user_id: CallerUser = None
    limit: int = Field(
        default=DEFAULT_HISTORY_PAGE,
        ge=1,
        le=MAX_HISTORY,
        description=f"Events per page, 1..{MAX_HISTORY} (a page also stops at 5 MiB of them).",
    )
    cursor: PageCursor = None
    consistency: ReadConsistency = "eventual"


class ExportRequest(ClosedModel):
    """GET /memories/export: everything the user has, as import lines, newest first (a page)."""

    user_id: CallerUser = None
    history: bool = Field(default=False, description="Each line with its memory's recorded changes.")
    limit: int = Field(default=DEFAULT_PAGE, ge=1, le=MAX_PAGE, description=f"Lines per page, 1..{MAX_PAGE}.")
    cursor: PageCursor = None
    consistency: ReadConsistency = "eventual"
    as_of: AwareDatetime | None = Field(default=None, description=AS_OF_HELP)


class ForgetUserRequest(ClosedModel):
    """DELETE /memories?user_id=...: erase everything stored about a user. The user is named even
    with a JWT, so that a stray DELETE never wipes anything."""

    user_id: UserId = Field(description="The user to erase (with a JWT: the token's sub).")


class PendingRequest(ClosedModel):
    """GET /memories/pending: the user's writes held for review, oldest first."""

    user_id: CallerUser = None
    project_id: ProjectId | None = Field(default=None, description="Also this project's held writes.")
    limit: int = Field(default=MAX_PAGE, ge=1, le=MAX_PAGE, description=f"At most this many, 1..{MAX_PAGE}.")


class ReviewRequest(ClosedModel):
    """POST /memories/{pending_id}/review: a person's decision on a write held for review."""

    pending_id: uuid.UUID = Field(description="The held write's id (from the pending list).")
    user_id: CallerUser = None
    decision: ReviewDecision = Field(
        description="approve: written as any write (and recalled from now on); reject: nothing is stored."
    )


class UsersRequest(ClosedModel):
    """GET /users: every user with their counts (trusted callers only: an IAM caller, the local server)."""

    limit: int = Field(default=MAX_PAGE, ge=1, le=MAX_PAGE, description=f"At most this many users, 1..{MAX_PAGE}.")


class ConversationRequest(ConversationEnded):
    """POST /conversations: the write path's "conversation ended" message, over HTTP (user_id
    is optional with a JWT, as everywhere)."""

    user_id: CallerUser = None  # type: ignore[assignment]  # the JWT's sub when absent


class InstructionsQuery(ClosedModel):
    """GET /instructions: the extraction instructions a project's conversations are extracted with."""

    user_id: CallerUser = None
    project_id: ProjectId | None = Field(default=None, description="The project (none: conversations without one).")


class InstructionsHistoryRequest(InstructionsQuery):
    """GET /instructions/history: the stored versions, oldest first."""

    limit: int = Field(
        default=MAX_INSTRUCTION_VERSIONS,
        ge=1,
        le=MAX_INSTRUCTION_VERSIONS,
        description=f"The last this many versions, 1..{MAX_INSTRUCTION_VERSIONS}.",
    )


class UsageRequest(ClosedModel):
    """GET /usage: a user's usage per day and its estimated cost (UTC days, both included)."""

    user_id: CallerUser = None
    start: dt.date | None = Field(default=None, description="First UTC day (default: 29 days before end).")
    end: dt.date | None = Field(default=None, description="Last UTC day, included (default: today).")


class ErasureRequest(ClosedModel):
    """GET /erasures/{erasure_id}: one erasure receipt (a JWT caller reads only its own)."""

    erasure_id: uuid.UUID = Field(description="The receipt's id (DELETE /memories answers it).")
    user_id: UserId | None = Field(default=None, description="Only this user's receipt (a JWT caller: its own).")


class ErasuresRequest(ClosedModel):
    """GET /erasures?user_id=...: every erasure receipt of a user id, oldest first (matched by the keyed hash)."""

    user_id: CallerUser = None


class MemoryHistory(WireModel):
    """GET /memories/{id}/history: a page of one memory's recorded changes, oldest first; pass
    ``next_cursor`` for the next page (None: the last). A page stops at ``limit`` events or at
    MAX_PAGE_BYTES of them, whichever comes first."""

    events: list[MemoryEvent]
    next_cursor: str | None = None


class ErrorDetail(WireModel):
    # Optional in the schema too: answers leave out a null field (found by schemathesis).
    field: str | None = None
    message: str


class ErrorBody(WireModel):
    """Every error answer: what went wrong, which field, and the request id to find the logs."""

    code: str
    message: str
    field: str | None = None
    errors: list[ErrorDetail] | None = None
    request_id: str | None = None


def no_content(description: str) -> OpenAPIResponse:
    """A bodiless answer (204): an empty content map, or the resolver would document its return type."""
    return {"description": description, "content": {}}


def documented(description: str, model: type[BaseModel]) -> OpenAPIResponse:
    """One entry of a route's ``responses`` (OpenAPI)."""
    return {"description": description, "content": {"application/json": {"model": model}}}


# Error answers every route can give (others are listed per route).
COMMON_ERRORS: dict[int, OpenAPIResponse] = {
    400: documented("Invalid request: the message names the problem and the field", ErrorBody),
    403: documented("user_id is not the authenticated user (JWT)", ErrorBody),
    404: documented("No such route, or (DELETE one) no such memory for this user", ErrorBody),
    405: documented("Method not allowed on this path (see Allow)", ErrorBody),
    413: documented("A value longer than its limit: the message names the field, its length and the limit", ErrorBody),
    415: documented("The body is not JSON", ErrorBody),
    500: documented("Unexpected error (details only in the logs, under request_id)", ErrorBody),
    503: documented("Database unavailable or too slow; retry (Retry-After)", ErrorBody),
}


class ErasureCounts(BaseModel):
    """How many rows of each kind went."""

    memories: int = 0
    history: int = 0
    ingest_receipts: int = 0
    usage_rows: int = 0  # usage_daily rows (one per day, kind of work and model)
    # Rows of memory_entities, a table migration 0010 dropped: receipts written before it say how
    # many went; the key stays so that every receipt has the same shape.
    entity_links: int = 0


class ErasureReceipt(BaseModel):
    """What forgetting a user deleted, when and at whose request; the subject only as a keyed hash."""

    id: uuid.UUID
    subject: str = Field(description="HMAC-SHA256 of the user id under the deployment's key (hex), never the id.")
    requested_by: str = Field(description="Who asked: 'user' (their own token), an IAM principal, 'cli', ...")
    erased_at: dt.datetime
    deleted: ErasureCounts
    backup_horizon: dt.datetime | None = Field(
        default=None,
        description="When the last automated backup holding the erased data expires: erased_at plus the "
        "database's backup retention (snapshots and point-in-time recovery, RUSHMEM_BACKUP_RETENTION_DAYS). "
        "Until then a restore could bring the data back; the erasure ledger erases it again before the "
        "restored database serves. null: the deployment declares no automated backups. Manual snapshots "
        "are kept until deleted.",
    )


class ErasureList(WireModel):
    """A user id's erasure receipts, oldest first."""

    receipts: list[ErasureReceipt]


class UsageLine(BaseModel):
    """One day's count of one kind of work with one model (``model`` is "" where none applies)."""

    day: dt.date
    kind: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    characters: int
    items: int
    estimated_usd: float = Field(description="This line at the price table's prices (see `rushmem cost`).")


class UsageReport(BaseModel):
    """A user's usage from ``start`` to ``end`` (UTC days, both included) and what it cost."""

    user_id: str
    start: dt.date
    end: dt.date
    lines: list[UsageLine]
    totals: dict[str, int] = Field(description="Calls per kind over the period.")
    estimated_usd: float = Field(
        description="Variable cost of this user's work; the stack's fixed cost is not shared out."
    )
    prices: str = Field(description="Which price table the estimate used.")


class TenantUsage(BaseModel):
    """One user's totals over a period (``rushmem usage --all``)."""

    user_id: str
    calls: dict[str, int]
    input_tokens: int
    output_tokens: int
    estimated_usd: float


def usage_totals(lines: Sequence[UsageLine]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for line in lines:
        totals[line.kind] = totals.get(line.kind, 0) + line.calls
    return totals
