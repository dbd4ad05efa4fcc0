"""The memory tools an agent calls over MCP, on the official SDK's ``MCPServer``.

Each tool is one :class:`~rushmem.service.Memory` call. Whose memories a call touches
comes from an :data:`IdentityResolver`, per request: the transport decides (stdio: the command
line; HTTP: the JWT's ``sub`` or the IAM caller's ``X-Memory-User``), never a tool argument, so a
prompt-injected model cannot read or change another user's memories.

Every failure the service anticipates (:class:`~rushmem_contract.errors.AgentMemoryError`) becomes a
tool error the model can read (``isError: true``) with the HTTP API's public wording; anything
else is a crash whose details stay in the server's log.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from rushmem import __version__
from rushmem.mcp.descriptions import (
    FORGET,
    GET,
    GET_INSTRUCTIONS,
    HISTORY,
    INSTRUCTIONS,
    LIST,
    PENDING,
    RECALL,
    REMEMBER,
    REMEMBER_CONVERSATION,
    SET_INSTRUCTIONS,
    UPDATE,
)
from rushmem.recall.block import defused_text
from rushmem.service import Memory
from rushmem_contract import schemas
from rushmem_contract.errors import AgentMemoryError, InvalidInput, NotFound
from rushmem_contract.instructions import ExtractionInstructions, ProjectCategory, StoredInstructions
from rushmem_contract.kinds import error_kind
from rushmem_contract.models import (
    MAX_CONTENT_CHARS,
    MAX_ID_CHARS,
    AwareDatetime,
    Category,
    ChatMessage,
    ConversationEnded,
    IngestOutcome,
    MemoryChanges,
    MemoryEvent,
    MemoryFilters,
    MemoryRecord,
    NewMemory,
    PendingMemory,
    ProjectId,
    RecalledMemory,
    RecallResult,
    StoredIds,
    error_field,
)
from rushmem_contract.params import default, param, spread
from rushmem_contract.schemas import AddRequest, ListRequest, RecallRequest

logger = logging.getLogger("rushmem.mcp")

SERVER_NAME = "agent-memory"
# The source the history records for what a tool changed.
MCP_SOURCE = "mcp"
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Identity:
    """Whose memories a request touches, and the project a session works in by default."""

    user_id: str
    project_id: str | None = None


# Called with the tool's Context on every call; raises AgentMemoryError when there is nobody.
IdentityResolver = Callable[[Context], Identity]


def fixed_identity(identity: Identity) -> IdentityResolver:
    """The same user for every call (stdio: one configured user per server process)."""
    return lambda _ctx: identity


# ---- tool results -------------------------------------------------------------------


DEFUSED = (
    "true: content is shown as the [RUSH_MEMORY] block shows it (parts that read as instructions to a model, "
    "chat-turn markers and block delimiters replaced); the exact stored text is the owner's, at GET "
    "/memories/{id} (content) or `rushmem get`."
)


class ToolMemory(MemoryRecord):
    """A memory as a tool hands it to the model: its text defused as in the prompt block."""

    content_defused: bool = Field(default=False, description=DEFUSED)


class ToolPendingMemory(PendingMemory):
    content_defused: bool = Field(default=False, description=DEFUSED)


class PendingList(BaseModel):
    memories: list[ToolPendingMemory]


class ToolRecalledMemory(RecalledMemory):
    content_defused: bool = Field(default=False, description=DEFUSED)


class ToolRecallResult(RecallResult):
    memories: list[ToolRecalledMemory]  # type: ignore[assignment]  # the same memories, defused


M = TypeVar("M", bound=BaseModel)


def defused(memory: MemoryRecord | RecalledMemory | MemoryEvent | PendingMemory, model: type[M]) -> M:
    """``memory`` (or a recorded change of one) as ``model`` with the block's defused text (one
    home: rushmem.recall.block). Every tool result that carries memory text goes through
    this: the model reads the whole result, not only the block."""
    # A deleted memory's history keeps no text (None): nothing to defuse.
    text = None if memory.content is None else defused_text(memory.content)
    values = {**dict(memory), "content": text, "content_defused": text != memory.content}
    return model.model_construct(**values)


class MemoryList(BaseModel):
    memories: list[ToolMemory]
    next_cursor: str | None = Field(description="Pass as cursor to get the next page; null on the last page.")


class ToolMemoryEvent(MemoryEvent):
    """A recorded change as a tool hands it to the model: the text it recorded, defused."""

    content_defused: bool = Field(default=False, description=DEFUSED)


class MemoryHistory(BaseModel):
    memory_id: uuid.UUID
    events: list[ToolMemoryEvent]
    next_cursor: str | None = Field(
        default=None, description="Pass as cursor to get the next page of events; null on the last page."
    )


class Forgotten(BaseModel):
    memory_id: uuid.UUID
    forgotten: bool


# Each argument's bounds and description are its request model's (rushmem_contract.schemas).
MemoryIdArg = Annotated[uuid.UUID, Field(description="The memory's id (from recall_memories or list_memories).")]
ProjectArg = Annotated[
    ProjectId | None,
    Field(description="A project id; defaults to the session's project, if it has one."),
]


# ---- the tools ----------------------------------------------------------------------


def filter_argument(name: str) -> Any:
    """The tool argument of the filter ``name``: the field's type, bounds and description (an
    object's checks run once, on the filters, so that a refusal names the argument)."""
    kind = schemas.filter_kind(name)
    annotation = dict[str, Any] | None if kind == "object" else MemoryFilters.model_fields[name].annotation
    return Annotated[annotation, param(MemoryFilters, name)]


# The filters as separate arguments of recall_memories and list_memories.
filter_arguments = spread(MemoryFilters, filter_argument)


def memory_filters(given: dict[str, Any]) -> MemoryFilters | None:
    """The filters given, or None; a bad combination is a tool error naming the field."""
    try:
        filters = MemoryFilters(**given)
    except ValidationError as exc:
        raise invalid_arguments(exc) from exc
    return None if filters.empty else filters


def tool_error(exc: AgentMemoryError) -> ToolError:
    """The model-facing message of a service error: the error table's code, then the HTTP API's
    public wording ("invalid_input: limit: ...")."""
    kind = error_kind(exc)
    message = kind.message(exc)
    if isinstance(exc, InvalidInput) and exc.field and not message.startswith(exc.field):
        message = f"{exc.field}: {message}"
    if kind.status >= 500:
        logger.error("tool failed: %s: %s", type(exc).__name__, exc)
    return ToolError(f"{kind.code}: {message}")


def invalid_arguments(exc: ValidationError, prefix: str | None = None, *, whole: bool = False) -> ToolError:
    """A tool's arguments refused: one sentence naming the argument (pydantic's own text, with its
    documentation links and the input echoed, is not for the model). ``prefix``: the argument the
    validated value came from; ``whole``: the argument is the value itself, whatever field failed."""
    errors = exc.errors(include_url=False, include_input=False)
    field = None if whole else error_field(exc)
    if prefix:
        field = f"{prefix}{field}" if field and field.startswith("[") else f"{prefix}.{field}" if field else prefix
    reason = str(errors[0]["msg"]).removeprefix("Value error, ") if errors else "invalid value"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return tool_error(InvalidInput(f"{field}: {reason}{more}" if field else f"{reason}{more}", field=field))


class MemoryTools:
    """The memory tools over one service. ``offload`` runs each service call on a worker thread
    (stdio, where the event loop must keep reading while a model loads); over HTTP a request is
    one call, run inline."""

    def __init__(self, service: Callable[[], Memory], identity: IdentityResolver, *, offload: bool = False) -> None:
        self._service = service
        self._identity = identity
        self._offload = offload
        # The service holds one database connection: its calls never overlap.
        self._lock = threading.Lock()

    async def _call(self, fn: Callable[[Memory], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn(self._service())

        try:
            if self._offload:
                return await anyio.to_thread.run_sync(locked)
            return locked()
        except AgentMemoryError as exc:
            raise tool_error(exc) from exc

    def warm_up(self) -> None:
        """Load the embedder and open the connection now (blocking), so the first tool call does
        not pay for them; a failure is logged, and the tool calls report it when they meet it."""
        try:
            with self._lock:
                service = self._service()
                service.admin.embedder.embed_query("warm up")
                service.admin.db.connection()
        except AgentMemoryError as exc:
            logger.warning("warm-up failed (tool calls will report the error): %s", exc)

    def _who(self, ctx: Context) -> Identity:
        try:
            return self._identity(ctx)
        except AgentMemoryError as exc:
            raise tool_error(exc) from exc

    @filter_arguments
    async def recall_memories(
        self,
        ctx: Context,
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_CONTENT_CHARS,
                description="What to look for, in a few words: the user's request or its topic, "
                "e.g. 'preferred programming language' or 'plans for the Berlin trip'.",
            ),
        ],
        project_id: ProjectArg = None,
        limit: Annotated[int | None, param(RecallRequest, "limit")] = None,
        as_of: Annotated[AwareDatetime | None, param(RecallRequest, "as_of")] = None,
        explain: Annotated[bool, param(RecallRequest, "explain")] = False,
        explain_ids: Annotated[list[uuid.UUID] | None, param(RecallRequest, "explain_ids")] = None,
        **filter_values: Any,
    ) -> ToolRecallResult:
        who = self._who(ctx)
        project = project_id or who.project_id
        filters = memory_filters(filter_values)
        result = await self._call(
            lambda s: s.recall(
                query,
                user_id=who.user_id,
                project_id=project,
                limit=limit,
                filters=filters,
                as_of=as_of,
                explain=explain,
                explain_ids=explain_ids,
            )
        )
        explanation = result.explanation
        if explanation is not None:  # its candidates' text, defused as every memory text a tool returns
            defused_candidates = [
                c.model_copy(update={"content": defused_text(c.content)}) for c in explanation.candidates
            ]
            explanation = explanation.model_copy(update={"candidates": defused_candidates})
        return ToolRecallResult.model_construct(
            memories=[defused(m, ToolRecalledMemory) for m in result.memories],
            prompt_block=result.prompt_block,
            query=result.query,
            explanation=explanation,
        )

    async def remember(
        self,
        ctx: Context,
        facts: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS)]],
            param(AddRequest, "memories"),
        ],
        category: Annotated[
            Category,
            Field(
                description="What kind of facts these are: identity (who the user is), preference, project, "
                "decision, fact (anything else lasting), other."
            ),
        ] = "fact",
        project_id: ProjectArg = None,
        user_wide: Annotated[
            bool | None,
            Field(
                description="true: facts about the user in general, recalled in every project; false: they belong "
                "to the project. Default: true for identity and preference, false otherwise."
            ),
        ] = None,
        expires_at: Annotated[
            AwareDatetime | None,
            Field(
                description="ISO 8601 date-time after which the facts no longer hold (e.g. the end of a trip); "
                "omit for lasting facts."
            ),
        ] = None,
        supersedes: Annotated[list[uuid.UUID] | None, param(NewMemory, "supersedes")] = None,
        valid_from: Annotated[AwareDatetime | None, param(NewMemory, "valid_from")] = None,
    ) -> StoredIds:
        who = self._who(ctx)
        wide = category in ("identity", "preference") if user_wide is None else user_wide
        project = None if wide else project_id or who.project_id
        memories = []
        for i, fact in enumerate(facts):
            try:
                memories.append(
                    NewMemory(
                        content=fact,
                        category=category,
                        expires_at=expires_at,
                        supersedes=supersedes or [],
                        valid_from=valid_from,
                    )
                )
            except ValidationError as exc:  # e.g. a fact that is only whitespace
                raise invalid_arguments(exc, f"facts[{i}]", whole=True) from exc
        return await self._call(lambda s: s.add(memories, user_id=who.user_id, project_id=project, source=MCP_SOURCE))

    async def remember_conversation(
        self,
        ctx: Context,
        messages: Annotated[
            list[ChatMessage],
            Field(
                min_length=1,
                description="The conversation's messages in order, each {role: user|assistant|..., content: text}.",
            ),
        ],
        conversation_id: Annotated[
            str | None,
            Field(
                max_length=MAX_ID_CHARS,
                description="The conversation's id, if it has one: recorded as the memories' source.",
            ),
        ] = None,
        project_id: ProjectArg = None,
    ) -> IngestOutcome:
        who = self._who(ctx)
        try:
            message = ConversationEnded(
                user_id=who.user_id,
                project_id=project_id or who.project_id,
                conversation_id=conversation_id,
                messages=messages,
            )
        except ValidationError as exc:
            raise invalid_arguments(exc) from exc
        return await self._call(lambda s: s.ingest_conversation(message))

    @filter_arguments
    async def list_memories(
        self,
        ctx: Context,
        project_id: ProjectArg = None,
        limit: Annotated[int, param(ListRequest, "limit")] = default(ListRequest, "limit"),
        cursor: Annotated[str | None, param(ListRequest, "cursor")] = None,
        include_inactive: Annotated[bool, param(ListRequest, "include_inactive")] = False,
        as_of: Annotated[AwareDatetime | None, param(ListRequest, "as_of")] = None,
        **filter_values: Any,
    ) -> MemoryList:
        who = self._who(ctx)
        project = project_id or who.project_id
        filters = memory_filters(filter_values)
        page = await self._call(
            lambda s: s.list(
                user_id=who.user_id,
                project_id=project,
                limit=limit,
                cursor=cursor,
                include_inactive=include_inactive,
                filters=filters,
                as_of=as_of,
            )
        )
        return MemoryList(memories=[defused(m, ToolMemory) for m in page.memories], next_cursor=page.next_cursor)

    async def get_memory(self, ctx: Context, memory_id: MemoryIdArg) -> ToolMemory:
        who = self._who(ctx)
        return defused(await self._call(lambda s: s.get(memory_id, user_id=who.user_id)), ToolMemory)

    async def update_memory(
        self,
        ctx: Context,
        memory_id: MemoryIdArg,
        content: Annotated[
            str | None, Field(max_length=MAX_CONTENT_CHARS, description="The corrected fact, if it changes.")
        ] = None,
        category: Annotated[Category | None, Field(description="A new category, if it changes.")] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Replaces the memory's metadata (a JSON object).")
        ] = None,
        is_evergreen: Annotated[
            bool | None, Field(description="true: the memory never fades with age in recall.")
        ] = None,
        expires_at: Annotated[AwareDatetime | None, Field(description="A new ISO 8601 expiry date-time.")] = None,
        remove_expiry: Annotated[bool, Field(description="true: the memory no longer expires.")] = False,
        typo_fix: Annotated[bool, param(MemoryChanges, "typo_fix")] = False,
    ) -> ToolMemory:
        who = self._who(ctx)
        given: dict[str, Any] = {
            k: v
            for k, v in {
                "content": content,
                "category": category,
                "metadata": metadata,
                "is_evergreen": is_evergreen,
                "expires_at": expires_at,
            }.items()
            if v is not None
        }
        if remove_expiry:
            if expires_at is not None:
                raise tool_error(InvalidInput("give expires_at or remove_expiry, not both", field="remove_expiry"))
            given["expires_at"] = None  # MemoryChanges: a given null clears the expiry
        if not given:
            raise tool_error(
                InvalidInput(
                    "nothing to change: pass content, category, metadata, is_evergreen, expires_at or remove_expiry"
                )
            )
        if typo_fix:
            given["typo_fix"] = True
        try:
            changes = MemoryChanges(**given)
        except ValidationError as exc:
            raise invalid_arguments(exc) from exc
        changed = await self._call(lambda s: s.update(memory_id, changes, user_id=who.user_id, source=MCP_SOURCE))
        return defused(changed, ToolMemory)

    async def forget_memory(self, ctx: Context, memory_id: MemoryIdArg) -> Forgotten:
        who = self._who(ctx)
        if not await self._call(lambda s: s.delete(memory_id, user_id=who.user_id, source=MCP_SOURCE)):
            # The same answer whether the id is another user's or nobody's: nothing leaks.
            raise tool_error(NotFound(f"no memory {memory_id} for this user (already forgotten, or a wrong id)"))
        return Forgotten(memory_id=memory_id, forgotten=True)

    async def pending_memories(self, ctx: Context, project_id: ProjectArg = None) -> PendingList:
        # Listing only: approving is a person's decision (the page, the API, the CLI), never the
        # model's, which may be reading the very text that waits.
        who = self._who(ctx)
        held = await self._call(lambda s: s.pending(user_id=who.user_id, project_id=project_id or who.project_id))
        return PendingList(memories=[defused(p, ToolPendingMemory) for p in held])

    async def memory_history(
        self,
        ctx: Context,
        memory_id: MemoryIdArg,
        cursor: Annotated[str | None, param(ListRequest, "cursor")] = None,
    ) -> MemoryHistory:
        who = self._who(ctx)
        page = await self._call(lambda s: s.history_page(memory_id, user_id=who.user_id, cursor=cursor))
        if not page.events and cursor is None:
            raise tool_error(NotFound(f"no history for memory {memory_id} for this user"))
        events = [defused(e, ToolMemoryEvent) for e in page.events]
        return MemoryHistory(memory_id=memory_id, events=events, next_cursor=page.next_cursor)

    async def get_instructions(self, ctx: Context, project_id: ProjectArg = None) -> StoredInstructions:
        who = self._who(ctx)
        project = project_id or who.project_id
        return await self._call(lambda s: s.instructions(user_id=who.user_id, project_id=project))

    async def set_instructions(
        self,
        ctx: Context,
        instructions: Annotated[str | None, param(ExtractionInstructions, "instructions")] = None,
        keep: Annotated[list[str] | None, param(ExtractionInstructions, "keep")] = None,
        ignore: Annotated[list[str] | None, param(ExtractionInstructions, "ignore")] = None,
        categories: Annotated[list[ProjectCategory] | None, param(ExtractionInstructions, "categories")] = None,
        project_id: ProjectArg = None,
    ) -> StoredInstructions:
        who = self._who(ctx)
        project = project_id or who.project_id
        given = {"instructions": instructions, "keep": keep, "ignore": ignore, "categories": categories}
        try:
            wanted = ExtractionInstructions.model_validate({k: v for k, v in given.items() if v is not None})
        except ValidationError as exc:
            raise invalid_arguments(exc) from exc
        return await self._call(
            lambda s: s.set_instructions(wanted, user_id=who.user_id, project_id=project, source=MCP_SOURCE)
        )


READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
CHANGES = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)


class MemoryServer(MCPServer[Any]):
    """The SDK's server, with arguments the tool's schema refuses worded as the tools word every
    error (:func:`invalid_arguments`) rather than as pydantic's multi-line report."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                raise invalid_arguments(cause) from cause
            raise


def build_server(tools: MemoryTools) -> MCPServer[Any]:
    """An MCPServer with the memory tools (the service is built lazily, so listing the tools needs
    no database)."""
    server: MCPServer[Any] = MemoryServer(
        SERVER_NAME,
        title="agent-memory",
        description="Long-term memory for AI agents: recall, remember, correct and forget facts about the user.",
        instructions=INSTRUCTIONS,
        version=__version__,
        # No subscriptions/listen: over HTTP it is an endless stream, which a Lambda cannot hold.
        subscriptions=False,
    )
    server.add_tool(tools.recall_memories, title="Recall memories", description=RECALL, annotations=READ_ONLY)
    server.add_tool(tools.remember, title="Remember facts", description=REMEMBER, annotations=WRITES)
    server.add_tool(
        tools.remember_conversation,
        title="Remember a conversation",
        description=REMEMBER_CONVERSATION,
        annotations=WRITES,
    )
    server.add_tool(tools.list_memories, title="List memories", description=LIST, annotations=READ_ONLY)
    server.add_tool(tools.get_memory, title="Get a memory", description=GET, annotations=READ_ONLY)
    server.add_tool(tools.update_memory, title="Update a memory", description=UPDATE, annotations=CHANGES)
    server.add_tool(tools.forget_memory, title="Forget a memory", description=FORGET, annotations=CHANGES)
    server.add_tool(tools.memory_history, title="Memory history", description=HISTORY, annotations=READ_ONLY)
    server.add_tool(
        tools.get_instructions, title="Extraction instructions", description=GET_INSTRUCTIONS, annotations=READ_ONLY
    )
    server.add_tool(
        tools.set_instructions,
        title="Set extraction instructions",
        description=SET_INSTRUCTIONS,
        annotations=CHANGES,
    )
    server.add_tool(tools.pending_memories, title="Pending memories", description=PENDING, annotations=READ_ONLY)
    return server
