"""The memory tools an agent calls over MCP, on the official SDK's ``MCPServer``: one tool per row of
the contract's table that names one (:class:`rushmem_contract.operations.Tool`), its arguments the
request's fields but the hidden ones, its call the dispatcher's.

Whose memories a call touches comes from an :data:`IdentityResolver`, per request: the transport
decides (stdio: the command line; HTTP: the JWT's ``sub`` or the IAM caller's ``X-Memory-User``),
never a tool argument, so a prompt-injected model cannot read or change another user's memories.
Arguments are validated as every door validates a request (:meth:`Operation.build`), so a refusal
is worded as the HTTP API words it; results carry memory text defused as the [RUSH_MEMORY] block
shows it. By default the server offers the small surface (the rows' ``core`` tools); ``tools="all"``
offers every tool.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field, create_model

from rushmem import __version__
from rushmem.recall.block import defused_text
from rushmem.service import Caller, Memory
from rushmem_contract import operations as ops
from rushmem_contract.descriptions import INSTRUCTIONS
from rushmem_contract.errors import AgentMemoryError
from rushmem_contract.kinds import error_kind
from rushmem_contract.models import (
    ExplainedCandidate,
    MemoryEvent,
    MemoryRecord,
    PendingMemory,
    RecalledMemory,
)
from rushmem_contract.operations import Operation

logger = logging.getLogger("rushmem.mcp")

SERVER_NAME = "agent-memory"
# The history's source of what a tool changed, and the caller's door.
MCP_SOURCE = "mcp"
Surface = Literal["core", "all"]
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


# ---- results: memory text defused, as the block shows it -------------------------------------

DEFUSED = (
    "true: content is shown as the [RUSH_MEMORY] block shows it (parts that read as instructions to a model, "
    "chat-turn markers and block delimiters replaced); the exact stored text is the owner's, at GET "
    "/memories/{id} (content) or `rushmem get`."
)


def _with_flag(model: type[BaseModel]) -> type[BaseModel]:
    return create_model(
        f"Tool{model.__name__}",
        __base__=model,
        content_defused=(bool, Field(default=False, description=DEFUSED)),
    )


# The models that carry a memory's text, and what a tool shows instead (its text defused, flagged).
SHOWN: dict[type[BaseModel], type[BaseModel]] = {
    model: _with_flag(model) for model in (MemoryRecord, RecalledMemory, MemoryEvent, PendingMemory)
}
_shown_models: dict[type[BaseModel], type[BaseModel]] = {}


def _shown_annotation(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return shown_model(annotation)
    origin = get_origin(annotation)
    if origin is list:
        return list[_shown_annotation(get_args(annotation)[0])]  # type: ignore[misc]
    if origin is not None and type(None) in get_args(annotation):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        if len(inner) == 1:
            return _shown_annotation(inner[0]) | None
    return annotation


def shown_model(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` as a tool returns it: the memory models within replaced by their flagged kin."""
    if model in SHOWN:
        return SHOWN[model]
    if model not in _shown_models:
        changed = {
            name: (_shown_annotation(field.annotation), field)
            for name, field in model.model_fields.items()
            if _shown_annotation(field.annotation) != field.annotation
        }
        _shown_models[model] = (
            create_model(f"Tool{model.__name__}", __base__=model, **changed)  # type: ignore[call-overload]
            if changed
            else model
        )
    return _shown_models[model]


def shown(value: Any) -> Any:
    """A result as a tool hands it to the model: every memory text in it defused (one home:
    rushmem.recall.block), the memory models flagged; the model reads the whole result, not only
    the block."""
    if isinstance(value, list):
        return [shown(v) for v in value]
    if not isinstance(value, BaseModel):
        return value
    values = {name: shown(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, (*SHOWN, ExplainedCandidate)) and isinstance(values.get("content"), str):
        text = defused_text(values["content"])
        if type(value) in SHOWN:
            values["content_defused"] = text != values["content"]
        values["content"] = text
    return shown_model(type(value)).model_construct(**values)


class Done(BaseModel):
    """What a tool whose operation answers nothing returns: that it was done."""

    done: bool = True


# ---- errors ------------------------------------------------------------------------------------


def tool_error(exc: AgentMemoryError) -> ToolError:
    """The model-facing message of a service error: the error table's code, then the HTTP API's
    public wording ("invalid_input: limit: ...", which begins with the field it names)."""
    kind = error_kind(exc)
    message = kind.message(exc)
    if kind.status >= 500:
        logger.error("tool failed: %s: %s", type(exc).__name__, exc)
    return ToolError(f"{kind.code}: {message}")


# ---- the tools -----------------------------------------------------------------------------------

READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
CHANGES = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
HINTS = {"reads": READ_ONLY, "writes": WRITES, "changes": CHANGES}
# Facts about who the user is or what they like hold in every project: not put in the session's.
USER_WIDE = ("identity", "preference")


def offered(surface: Surface = "all") -> list[Operation[Any, Any]]:
    """The rows a server offers as tools: the core ones, or all that have a tool."""
    return [op for op in ops.OPERATIONS if op.mcp is not None and (surface == "all" or op.mcp.core)]


def arguments_of(op: Operation[Any, Any]) -> list[inspect.Parameter]:
    """A tool's arguments: the request's fields but the hidden ones (and never the user or the read's
    consistency, as :class:`~rushmem_contract.operations.Tool` says), with their types, bounds,
    defaults and descriptions (the model's own field definitions)."""
    assert op.mcp is not None
    hidden = {"user_id", "consistency", *op.mcp.hidden}
    params = []
    for name, field in op.request.model_fields.items():
        if name in hidden:
            continue
        default = inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        # The field's own constraints and validators, its description; the default is the parameter's.
        annotation = Annotated[(field.annotation, *field.metadata, Field(description=field.description))]  # type: ignore[valid-type,name-defined]
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
    return params


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

    async def call(self, op: Operation[Any, Any], arguments: dict[str, Any], ctx: Context) -> Any:
        """One tool call: the arguments as the operation's request for the session's user (and,
        when none is given, its project), run by the dispatcher, the result as shown to a model."""
        try:
            who = self._identity(ctx)
        except AgentMemoryError as exc:
            raise tool_error(exc) from exc
        # A null is what every door makes of it (Operation.build): "not given" where the field cannot
        # be null, its value where it can (a change's null expires_at: never expires).
        given = dict(arguments)
        default_project = who.project_id is not None and not (op is ops.ADD and given.get("category") in USER_WIDE)
        if default_project and "project_id" in op.request.model_fields and given.get("project_id") is None:
            given["project_id"] = who.project_id
        caller = Caller(door=MCP_SOURCE, user=who.user_id, requested_by="user")
        try:
            request = op.build(**given)
        except AgentMemoryError as exc:
            raise tool_error(exc) from exc
        result = await self._call(lambda s: s.invoke(op, request, caller=caller))
        return Done() if op.response is None else shown(result)

    def function(self, op: Operation[Any, Any]) -> Callable[..., Any]:
        """The tool's function, its signature made from the row (the SDK reads it for the schema)."""

        async def tool(ctx: Context, **arguments: Any) -> Any:
            return await self.call(op, arguments, ctx)

        params = [
            inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context),
            *arguments_of(op),
        ]
        returns = Done if op.response is None else shown_model(op.response)
        tool.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
        tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
        tool.__name__ = op.mcp.name if op.mcp else op.name
        return tool


class MemoryServer(MCPServer[Any]):
    """The SDK's server, whose memory tools validate their arguments as every door validates a
    request (the operation's model, through :meth:`MemoryTools.call`) rather than with the SDK's
    own argument model, so that a refusal reads as the HTTP API's."""

    def __init__(self, tools: MemoryTools, rows: dict[str, Operation[Any, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._tools = tools
        self._rows = rows

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None) -> Any:
        op = self._rows.get(name)
        tool = self._tool_manager.get_tool(name)
        if op is None or tool is None:
            return await super().call_tool(name, arguments, context)
        if context is None:
            context = Context(mcp_server=self, subscriptions=self._subscriptions)
        parsed = tool.fn_metadata.pre_parse_json(arguments)  # JSON sent inside strings (some hosts do)
        result = await self._tools.call(op, parsed, context)
        return tool.fn_metadata.convert_result(result)


def build_server(tools: MemoryTools, surface: Surface = "all") -> MCPServer[Any]:
    """An MCPServer with the memory tools of ``surface`` (the service is built lazily, so listing
    the tools needs no database)."""
    rows = {op.mcp.name: op for op in offered(surface) if op.mcp is not None}
    server = MemoryServer(
        tools,
        rows,
        name=SERVER_NAME,
        title="agent-memory",
        description="Long-term memory for AI agents: recall, remember, correct and forget facts about the user.",
        instructions=INSTRUCTIONS,
        version=__version__,
        # No subscriptions/listen: over HTTP it is an endless stream, which a Lambda cannot hold.
        subscriptions=False,
    )
    for name, op in rows.items():
        assert op.mcp is not None
        server.add_tool(
            tools.function(op),
            name=name,
            title=op.mcp.title,
            description=op.mcp.description,
            annotations=HINTS[op.effect],
        )
    return server
