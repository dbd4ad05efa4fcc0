"""Every operation of the service, one row each: its name, HTTP method and path, request and
response models, who may call it, and how the MCP server and the CLI offer it. Every door is
derived from this table: the HTTP routes (:mod:`rushmem.routes`), the MCP tools
(:mod:`rushmem.mcp.tools`), the CLI's subcommands (:mod:`rushmem_tools.cli`), the Python
clients (:mod:`rushmem_client`), the in-process :class:`rushmem.Memory`, and, through the OpenAPI
document, the TypeScript client. The service's dispatcher runs a row's verb in the user's cell.

A request model holds every input of its operation (path parameters too), so one validation,
:meth:`Operation.build`, decides for every door what is accepted and how a refusal is worded.
How a request travels over HTTP (path, query string, JSON body) is :meth:`Operation.http` and,
on the server, :meth:`Operation.from_http`; docs/development.md says how to add an operation.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Generic, Literal, TypeVar, cast, get_args, get_origin
from urllib.parse import quote

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from rushmem_contract import descriptions as about
from rushmem_contract import schemas
from rushmem_contract.errors import InvalidInput
from rushmem_contract.instructions import InstructionsHistory, InstructionsRequest, StoredInstructions
from rushmem_contract.models import (
    ExportPage,
    IngestOutcome,
    MemoryChanges,
    MemoryPage,
    MemoryRecord,
    NewMemory,
    PendingPage,
    RecallResult,
    ReviewOutcome,
    StoredIds,
    UserList,
    refusal,
    too_large,
)

Req = TypeVar("Req", bound=BaseModel)
Res = TypeVar("Res")

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
# What a call does to the store: the MCP tool's hints, and which connection the service uses.
Effect = Literal["reads", "writes", "changes"]
# Who may call: "user", any caller acting for one user (a JWT acts for its own sub, a trusted
# caller names the user); "any", as "user" but a trusted caller may name no user (reads across users);
# "trusted", callers that are not one user (IAM, the local server, the CLI), never a JWT's.
Access = Literal["user", "any", "trusted"]

_PATH_FIELD = re.compile(r"\{(\w+)\}")


@dataclasses.dataclass(frozen=True)
class Tool:
    """How the MCP server offers an operation. Its arguments are the request's fields but
    ``hidden`` ones, the user (the transport says who it is) and the read's consistency; in the
    small surface, not the ``lean`` ones either (a dotted name is a field of a nested object)."""

    name: str
    title: str
    description: str
    hidden: tuple[str, ...] = ()
    # In the server's default, small surface (`rushmem mcp`); the others only with `--tools all`.
    core: bool = False
    # Left out of the small surface, whose schemas every model turn carries: fields a model seldom
    # needs there (`--tools all` offers them).
    lean: tuple[str, ...] = ()

    def left_out(self, small: bool) -> tuple[str, ...]:
        """The fields the tool does not offer (beyond the user and the consistency)."""
        return (*self.hidden, *self.lean) if small else self.hidden


@dataclasses.dataclass(frozen=True)
class Command:
    """How the CLI offers an operation: a subcommand whose flags are the request's fields (but the
    read's consistency); ``positional`` is taken from the words after the flags."""

    name: str
    help: str
    positional: str | None = None


@dataclasses.dataclass(frozen=True)
class HttpCall:
    """An operation's request as it travels: method, path (encoded), query string values, JSON body."""

    method: HttpMethod
    path: str
    query: dict[str, str]
    body: dict[str, Any] | None


@dataclasses.dataclass(frozen=True)
class Operation(Generic[Req, Res]):
    """One row of the table (see the module's docstring)."""

    name: str
    route: str  # "METHOD /path", as API Gateway keys a route ({memory_id}: a path field)
    request: type[Req]
    response: type[Res] | None  # None: no content (204)
    summary: str
    effect: Effect = "reads"
    access: Access = "user"
    status: int = 200
    # Body methods: the fields that travel in the query string instead (PATCH's user_id), and the
    # model the body is documented as when it is not the request's other fields as they are.
    in_query: tuple[str, ...] = ()
    body: type[BaseModel] | None = None
    # Answers beyond the ones every route gives (schemas.COMMON_ERRORS), by status.
    errors: tuple[tuple[int, str], ...] = ()
    # Python doors (in-process Memory, both clients): the fields that may be given positionally.
    positional: tuple[str, ...] = ()
    mcp: Tool | None = None
    cli: Command | None = None

    @property
    def method(self) -> HttpMethod:
        return cast("HttpMethod", self.route.split(" ", 1)[0])

    @property
    def path(self) -> str:
        return self.route.split(" ", 1)[1]

    @property
    def writes(self) -> bool:
        return self.effect != "reads"

    @property
    def path_fields(self) -> tuple[str, ...]:
        return tuple(_PATH_FIELD.findall(self.path))

    @property
    def has_body(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH")

    def query_fields(self) -> tuple[str, ...]:
        """The request's fields that travel in the query string."""
        if self.has_body:
            return self.in_query
        return tuple(name for name in self.request.model_fields if name not in self.path_fields)

    def body_fields(self) -> tuple[str, ...]:
        if not self.has_body:
            return ()
        skip = {*self.path_fields, *self.in_query}
        return tuple(name for name in self.request.model_fields if name not in skip)

    # ---- one validation for every door --------------------------------------------------

    def build(self, *args: Any, **fields: Any) -> Req:
        """The request from a door's arguments: the request model itself, or its fields (the first
        few positionally, as :attr:`positional` names them). A keyword given as None for a field
        that cannot be None means "not given" (the default applies), as it does in every client.
        InvalidInput (InputTooLarge) naming the field otherwise: the same refusal at every door."""
        given: dict[str, Any] = {}
        if args and isinstance(args[0], BaseModel) and issubclass(self.request, type(args[0])):
            # The request model itself, or one it extends (a ConversationEnded for POST /conversations).
            if len(args) == 1 and not fields and isinstance(args[0], self.request):
                return args[0]
            given = args[0].model_dump(exclude_unset=True)
            args = args[1:]
        if len(args) > len(self.positional):
            raise TypeError(f"{self.name}() takes {len(self.positional)} positional argument(s), {len(args)} given")
        given.update(zip(self.positional, args, strict=False))
        model_fields = self.request.model_fields
        for name, value in fields.items():
            if value is None and name in model_fields and not _takes_none(model_fields[name]):
                continue
            given[name] = value
        return validated(self.request, given)

    # ---- HTTP ---------------------------------------------------------------------------

    def http(self, request: Req) -> HttpCall:
        """The request as it travels (the clients send this)."""
        values = request.model_dump(mode="json", exclude_unset=True, by_alias=True)
        path = self.path
        for name in self.path_fields:
            path = path.replace("{" + name + "}", quote(str(values.pop(name)), safe=""))
        names = {_wire_name(self.request.model_fields[name], name) for name in self.query_fields()}
        query = encode_query(self.request, {k: values.pop(k) for k in list(values) if k in names})
        body = values if self.has_body else None
        return HttpCall(self.method, path, query, body)

    def from_http(self, path: Mapping[str, str], query: Mapping[str, str], body: Any) -> Req:
        """The request from what the HTTP API received (the routes call this)."""
        if self.has_body and not isinstance(body, Mapping):
            raise InvalidInput("a JSON object is required as the request body")
        data: dict[str, Any] = dict(body) if self.has_body else {}
        data.update(decode_query(self.request, query, self.query_fields()))
        data.update(path)
        return validated(self.request, data)

    def wire(self) -> dict[str, Any]:
        """Where each field travels, by the names the request's schema uses (its alias, where it has
        one), for a client generated from the OpenAPI document (its ``x-rushmem``): the request
        model, the path, query and body fields, and how each query field is written ("text",
        "list", "object", or a nested model's fields in its place)."""

        def encoding(model: type[BaseModel], names: Sequence[str]) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for name in names:
                field = model.model_fields[name]
                nested = nested_model(field)
                out[_wire_name(field, name)] = (
                    {"model": nested.__name__, "fields": encoding(nested, list(nested.model_fields))}
                    if nested is not None
                    else value_kind(field.annotation)
                )
            return out

        fields = self.request.model_fields
        return {
            "request": self.request.__name__,
            "path": list(self.path_fields),
            "query": [_wire_name(fields[name], name) for name in self.query_fields()],
            "body": [_wire_name(fields[name], name) for name in self.body_fields()],
            "encoding": encoding(self.request, self.query_fields()),
        }


def validated(model: type[Req], data: Mapping[str, Any]) -> Req:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise refusal(exc, "request") from None


def _takes_none(field: FieldInfo) -> bool:
    annotation = field.annotation
    return annotation is None or type(None) in get_args(annotation)


# The items of a listing (a page, or every version): its one list field, by name.
PAGE_ITEMS = ("memories", "lines", "events", "users", "receipts", "versions")


def is_listing(model: type[BaseModel] | None) -> bool:
    """Whether an answer is a list of items and, for a page, the next cursor; nothing else (a
    recall's memories come with its block: no listing)."""
    if model is None:
        return False
    names = set(model.model_fields) - {"next_cursor"}
    return len(names) == 1 and names <= set(PAGE_ITEMS)


def page_items(page: BaseModel) -> tuple[list[Any], str | None]:
    """A listing's items and its next cursor (None: the last page, or no pages)."""
    name = next(n for n in PAGE_ITEMS if n in type(page).model_fields)
    return list(getattr(page, name)), getattr(page, "next_cursor", None)


# ---- the query string: scalars as text, lists comma-separated, objects as JSON, a nested
# model's fields flattened (GET /memories' filters) ---------------------------------------------

# A list or an object travels in the URL as text: kept well under URL limits (a longer one fits a
# body), and checked before it is parsed.
MAX_QUERY_TEXT = {"list": 512, "object": 2048}


def _wire_name(field: FieldInfo, name: str) -> str:
    return field.alias or name


def _inner(annotation: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]``."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is not None and len(args) == 1 and type(None) in get_args(annotation):
        annotation = args[0]
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def nested_model(field: FieldInfo) -> type[BaseModel] | None:
    """The model a field holds (``Model``, ``Model | None``), if any: GET /memories' filters."""
    inner = _inner(field.annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def value_kind(annotation: Any) -> Literal["list", "object", "text"]:
    """How a field's value travels as one string: a list comma-separated, an object as JSON,
    anything else (numbers, booleans, times, ids) as its text."""
    base = get_origin(_inner(annotation)) or _inner(annotation)
    if base is list:
        return "list"
    if base is dict:
        return "object"
    return "text"


def _as_text(value: Any, kind: str) -> str:
    if kind == "list":
        return ",".join(str(v) for v in value)
    if kind == "object":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)  # JSON-mode values: times and ids are strings already


def encode_query(model: type[BaseModel], values: Mapping[str, Any]) -> dict[str, str]:
    """``values`` (JSON-mode, by alias) as query string values."""
    out: dict[str, str] = {}
    by_wire = {_wire_name(f, n): f for n, f in model.model_fields.items()}
    for name, value in values.items():
        if value is None:
            continue
        field = by_wire[name]
        nested = nested_model(field)
        if nested is not None:
            out.update(encode_query(nested, value))
        else:
            out[name] = _as_text(value, value_kind(field.annotation))
    return out


def decode_query(
    model: type[BaseModel], query: Mapping[str, str], names: Sequence[str], within: str = ""
) -> dict[str, Any]:
    """The fields ``names`` of ``model`` from query string values (read back as
    :func:`encode_query` wrote them); other parameters are ignored. ``within``: the path of a
    nested model's fields, for the field a refusal names."""
    data: dict[str, Any] = {}
    for name in names:
        field = model.model_fields[name]
        nested = nested_model(field)
        if nested is not None:
            inner = decode_query(nested, query, list(nested.model_fields), f"{within}{name}.")
            if inner:
                data[name] = inner
            continue
        wire = _wire_name(field, name)
        text = query.get(wire)
        if text is None:
            continue
        kind = value_kind(field.annotation)
        if len(text) > MAX_QUERY_TEXT.get(kind, len(text)):
            raise too_large(f"{within}{name}", len(text), MAX_QUERY_TEXT[kind])
        if kind == "list":
            data[wire] = [item.strip() for item in text.split(",") if item.strip()]
        elif kind == "object":
            try:
                data[wire] = json.loads(text)
            except (ValueError, RecursionError):
                raise InvalidInput(
                    f'{within}{name}: must be a JSON object, e.g. {{"team": "web"}}', field=f"{within}{name}"
                ) from None
        else:
            data[wire] = text
    return data


# ---- the table -------------------------------------------------------------------------------

RECALL: Operation[schemas.RecallRequest, RecallResult] = Operation(
    name="recall",
    route="POST /recall",
    request=schemas.RecallRequest,
    response=RecallResult,
    summary="Memories relevant to a query, and the prompt block",
    errors=((413, "The query is longer than RUSHMEM_MAX_QUERY_CHARS"),),
    positional=("query",),
    mcp=Tool(
        "recall_memories",
        "Recall memories",
        about.RECALL,
        hidden=("messages", "now", "include_inactive"),
        core=True,
        # No debugging fields, no apps' metadata; a time the request names goes in the query ("in
        # March 2023", "yesterday"), whose date words recall reads.
        lean=(
            "explain",
            "explain_ids",
            "max_tokens",
            "filters.metadata",
            "filters.created_after",
            "filters.created_before",
        ),
    ),
    cli=Command("recall", "recall the memories relevant to a query", positional="query"),
)

ADD: Operation[schemas.AddRequest, StoredIds] = Operation(
    name="add",
    route="POST /memories",
    request=schemas.AddRequest,
    response=StoredIds,
    summary="Store memories now (facts as given; chat messages through extraction)",
    effect="writes",
    status=201,
    errors=((413, "Too many memories, or one too long"),),
    positional=("memories",),
    mcp=Tool(
        "remember",
        "Remember facts",
        about.REMEMBER,
        hidden=("messages", "infer"),
        core=True,
        # A correction is update_memory's; a fact as an object is its content and category.
        lean=(
            *("is_evergreen", "supersedes", "depends_on", "metadata"),
            *(f"memories.{name}" for name in NewMemory.model_fields if name not in ("content", "category")),
        ),
    ),
    cli=Command("add", "store facts for a user (one memory per TEXT)", positional="memories"),
)

LIST: Operation[schemas.ListRequest, MemoryPage] = Operation(
    name="list",
    route="GET /memories",
    request=schemas.ListRequest,
    response=MemoryPage,
    summary="A page of the caller's memories, newest first",
    mcp=Tool(
        "list_memories",
        "List memories",
        about.LIST,
        core=True,
        lean=("include_inactive", "as_of", "filters.metadata"),
    ),
    cli=Command("list", "a page of a user's memories, newest first (JSON Lines when piped)"),
)

EXPORT: Operation[schemas.ExportRequest, ExportPage] = Operation(
    name="export",
    route="GET /memories/export",
    request=schemas.ExportRequest,
    response=ExportPage,
    summary="Everything the caller has, as import lines (a page; follow next_cursor)",
    cli=Command("export", "everything a user has as import lines (JSON Lines), newest first"),
)

PENDING: Operation[schemas.PendingRequest, PendingPage] = Operation(
    name="pending",
    route="GET /memories/pending",
    request=schemas.PendingRequest,
    response=PendingPage,
    summary="The caller's writes waiting for review (never recalled until approved) and consolidation's "
    "proposals, oldest first",
    mcp=Tool("pending_memories", "Pending memories", about.PENDING),
    cli=Command("pending", "a user's writes and consolidation's proposals held for review (RUSHMEM_REVIEW_WRITES)"),
)

GET: Operation[schemas.GetRequest, MemoryRecord] = Operation(
    name="get",
    route="GET /memories/{memory_id}",
    request=schemas.GetRequest,
    response=MemoryRecord,
    summary="One of the caller's memories",
    positional=("memory_id",),
    mcp=Tool("get_memory", "Get a memory", about.GET),
    cli=Command("get", "one of a user's memories"),
)

UPDATE: Operation[schemas.UpdateRequest, MemoryRecord] = Operation(
    name="update",
    route="PATCH /memories/{memory_id}",
    request=schemas.UpdateRequest,
    response=MemoryRecord,
    summary="Change one of the caller's memories (fields left out stay; null clears expires_at or metadata)",
    effect="changes",
    in_query=("user_id",),
    body=MemoryChanges,
    errors=(
        (409, "Another memory of the same scope already states this content"),
        (413, "The content is longer than RUSHMEM_MAX_MEMORY_CHARS"),
    ),
    # A second argument is the change: a mapping or MemoryChanges, or a text (mem0's update(id, data)).
    positional=("memory_id", "data"),
    mcp=Tool("update_memory", "Correct a memory", about.UPDATE, core=True, lean=("metadata", "is_evergreen")),
    cli=Command(
        "update",
        "change one memory (a new content is a new version: the previous text stays true until now, in the "
        "history); prints the memory",
    ),
)

DELETE: Operation[schemas.DeleteRequest, None] = Operation(
    name="delete",
    route="DELETE /memories/{memory_id}",
    request=schemas.DeleteRequest,
    response=None,
    summary="Forget one of the caller's memories, with the earlier versions its edits and corrections left",
    effect="changes",
    status=204,
    positional=("memory_id",),
    mcp=Tool("forget_memory", "Forget a memory", about.FORGET, core=True),
    cli=Command("forget", "forget one of a user's memories"),
)

HISTORY: Operation[schemas.HistoryRequest, schemas.MemoryHistory] = Operation(
    name="history",
    route="GET /memories/{memory_id}/history",
    request=schemas.HistoryRequest,
    response=schemas.MemoryHistory,
    summary="A page of the recorded changes of one of the caller's memories, oldest first",
    positional=("memory_id",),
    mcp=Tool("memory_history", "Memory history", about.HISTORY, hidden=("limit",)),
    cli=Command("history", "the recorded changes of a user's memories (or of one, --id), oldest first"),
)

FORGET_USER: Operation[schemas.ForgetUserRequest, schemas.ErasureReceipt] = Operation(
    name="forget_user",
    route="DELETE /memories",
    request=schemas.ForgetUserRequest,
    response=schemas.ErasureReceipt,
    summary="Forget everything stored about a user (user_id is required, also with a JWT); the erasure receipt",
    effect="changes",
    positional=("user_id",),
    cli=Command("forget-user", "erase everything stored about a user; prints the erasure receipt"),
)

REVIEW: Operation[schemas.ReviewRequest, ReviewOutcome] = Operation(
    name="review",
    route="POST /memories/{pending_id}/review",
    request=schemas.ReviewRequest,
    response=ReviewOutcome,
    summary="Approve or reject one of the caller's writes held for review",
    effect="writes",
    errors=((409, "The write was decided already (the message names the decision taken)"),),
    positional=("pending_id", "decision"),
    cli=Command("review", "approve or reject a write held for review (approved: written and recalled)"),
)

USERS: Operation[schemas.UsersRequest, UserList] = Operation(
    name="users",
    route="GET /users",
    request=schemas.UsersRequest,
    response=UserList,
    summary="Every user with their counts of memories (an IAM caller or the local server; not a JWT user)",
    access="trusted",
    errors=((403, "A JWT user may see only their own memories"),),
    cli=Command("users", "every user with their counts of memories and pending writes, by id"),
)

INGEST: Operation[schemas.ConversationRequest, IngestOutcome] = Operation(
    name="ingest_conversation",
    route="POST /conversations",
    request=schemas.ConversationRequest,
    response=IngestOutcome,
    summary="Hand a finished conversation to the write path now and get what it stored",
    effect="writes",
    errors=(
        (413, "Too many messages or memories, or one too long"),
        (502, "The extraction or embedding provider failed"),
    ),
    positional=("messages",),
    mcp=Tool("remember_conversation", "Remember a conversation", about.REMEMBER_CONVERSATION, hidden=("ended_at",)),
    # Read from a file of messages (JSON, or JSON Lines of many), as the queue delivers them.
    cli=Command("ingest", "hand finished conversations (a JSON message, or JSON Lines of them) to the write path"),
)

GET_INSTRUCTIONS: Operation[schemas.InstructionsQuery, StoredInstructions] = Operation(
    name="get_instructions",
    route="GET /instructions",
    request=schemas.InstructionsQuery,
    response=StoredInstructions,
    summary="The extraction instructions a project's conversations are extracted with",
    mcp=Tool("get_instructions", "Extraction instructions", about.GET_INSTRUCTIONS),
    cli=Command("instructions", "a project's extraction instructions (what its extractor keeps and ignores)"),
)

SET_INSTRUCTIONS: Operation[InstructionsRequest, StoredInstructions] = Operation(
    name="set_instructions",
    route="PUT /instructions",
    request=InstructionsRequest,
    response=StoredInstructions,
    summary="Replace a project's extraction instructions (the previous version stays in the history)",
    effect="changes",
    mcp=Tool("set_instructions", "Set extraction instructions", about.SET_INSTRUCTIONS),
    cli=Command("set-instructions", "replace a project's extraction instructions (a new version)"),
)

INSTRUCTIONS_HISTORY: Operation[schemas.InstructionsHistoryRequest, InstructionsHistory] = Operation(
    name="instructions_history",
    route="GET /instructions/history",
    request=schemas.InstructionsHistoryRequest,
    response=InstructionsHistory,
    summary="Every stored version of a project's extraction instructions, oldest first",
    cli=Command("instructions-history", "every stored version of a project's extraction instructions"),
)

USAGE: Operation[schemas.UsageRequest, schemas.UsageReport] = Operation(
    name="usage",
    route="GET /usage",
    request=schemas.UsageRequest,
    response=schemas.UsageReport,
    summary="A user's usage per day (recalls, conversations, writes, LLM and embedding calls, tokens) and its cost",
    positional=("user_id",),
    cli=Command("usage", "a user's usage per day (calls, tokens, characters) and its estimated cost"),
)

ERASURE: Operation[schemas.ErasureRequest, schemas.ErasureReceipt] = Operation(
    name="erasure",
    route="GET /erasures/{erasure_id}",
    request=schemas.ErasureRequest,
    response=schemas.ErasureReceipt,
    summary="An erasure receipt: what forgetting a user deleted, when, at whose request",
    access="any",
    positional=("erasure_id",),
    cli=Command("erasure", "an erasure receipt by id", positional="erasure_id"),
)

ERASURES: Operation[schemas.ErasuresRequest, schemas.ErasureList] = Operation(
    name="erasures",
    route="GET /erasures",
    request=schemas.ErasuresRequest,
    response=schemas.ErasureList,
    summary="Every erasure receipt of a user id, oldest first (matched by the keyed hash)",
    positional=("user_id",),
    cli=Command("erasures", "every erasure receipt of a user id"),
)

# Static paths before the dynamic ones they could be read as (/memories/export, /memories/{id}).
OPERATIONS: tuple[Operation[Any, Any], ...] = (
    RECALL,
    ADD,
    LIST,
    EXPORT,
    PENDING,
    GET,
    UPDATE,
    DELETE,
    HISTORY,
    FORGET_USER,
    REVIEW,
    USERS,
    INGEST,
    GET_INSTRUCTIONS,
    SET_INSTRUCTIONS,
    INSTRUCTIONS_HISTORY,
    USAGE,
    ERASURE,
    ERASURES,
)
BY_NAME: dict[str, Operation[Any, Any]] = {op.name: op for op in OPERATIONS}


def operation(name: str) -> Operation[Any, Any]:
    return BY_NAME[name]
