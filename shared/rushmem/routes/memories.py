"""``/memories``: store, list, export, read, change, see the history of and forget a caller's
memories, and forget everything about a user (with the erasure receipt)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from rushmem.http.identity import caller_user_id, requester
from rushmem.lifecycle import get_service
from rushmem.routes.request import claims, iam_arn
from rushmem_contract import schemas
from rushmem_contract.errors import InvalidInput, NotFound
from rushmem_contract.models import (
    DEFAULT_HISTORY_PAGE,
    DEFAULT_PAGE,
    MAX_CURSOR_CHARS,
    MAX_HISTORY,
    Consistency,
    ExportPage,
    MemoryChanges,
    MemoryFilters,
    MemoryPage,
    MemoryRecord,
    ProjectId,
    StoredIds,
    UserId,
)
from rushmem_contract.params import bounds, spread
from rushmem_contract.schemas import ListRequest

router = Router()
HISTORY_LIMIT_HELP = f"Events per page, 1..{MAX_HISTORY} (a page also stops at 5 MiB of them)."

# The paging and reading parameters of GET /memories and /memories/export, with ListRequest's
# bounds (the contract defines them once). as_of travels as text, parsed by schemas.as_of_param.
PageLimit = Annotated[int, Query(**bounds(ListRequest, "limit"))]
PageCursor = Annotated[str | None, Query(**bounds(ListRequest, "cursor"))]
ReadConsistency = Annotated[Consistency, Query(description=schemas.CONSISTENCY_HELP)]
AsOf = Annotated[str | None, Query(max_length=64, description=schemas.AS_OF_HELP)]

# A filter travels in the URL as text: kept well under URL limits (a longer one fits POST /recall).
MAX_FILTER_PARAM = {"list": 512, "object": 2048, "time": 64, "text": 512}


def filter_parameter(name: str) -> Any:
    """GET /memories' query parameter for the filter ``name``, described as the model describes it."""
    kind = schemas.filter_kind(name)
    description = MemoryFilters.model_fields[name].description or ""
    if kind == "list":
        description += " Comma-separated."
    return Annotated[str | None, Query(max_length=MAX_FILTER_PARAM[kind], description=description)]


@router.post(
    "/memories",
    status_code=201,
    summary="Store memories now (no LLM)",
    responses={
        **schemas.COMMON_ERRORS,
        201: schemas.documented("Stored; ids in input order", StoredIds),
        413: schemas.documented("Too many memories, or one too long", schemas.ErrorBody),
    },
)
def add_memories(request: schemas.AddRequest) -> StoredIds:
    user_id = caller_user_id(claims(router), request.user_id)
    return get_service().add(request.memories, user_id=user_id, project_id=request.project_id, source="api")


@router.get(
    "/memories",
    summary="A page of the caller's memories, newest first",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("A page and the next cursor", MemoryPage)},
)
@spread(MemoryFilters, filter_parameter)
def list_memories(
    user_id: Annotated[UserId | None, Query()] = None,
    project_id: Annotated[ProjectId | None, Query()] = None,
    limit: PageLimit = DEFAULT_PAGE,
    cursor: PageCursor = None,
    include_inactive: Annotated[bool, Query(description="Also superseded and expired memories.")] = False,
    consistency: ReadConsistency = "eventual",
    as_of: AsOf = None,
    **filter_values: str | None,
) -> MemoryPage:
    owner = caller_user_id(claims(router), user_id)
    filters = schemas.list_filters(filter_values)
    return get_service().list(
        user_id=owner,
        project_id=project_id,
        limit=limit,
        cursor=cursor,
        include_inactive=include_inactive,
        filters=filters,
        consistency=consistency,
        as_of=schemas.as_of_param(as_of),
    )


@router.get(
    "/memories/export",
    summary="Everything the caller has, as import lines (a page; follow next_cursor)",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("A page of import lines", ExportPage)},
)
def export_memories(
    user_id: Annotated[UserId | None, Query()] = None,
    history: Annotated[bool, Query(description="Each line with its memory's recorded changes.")] = False,
    limit: PageLimit = DEFAULT_PAGE,
    cursor: PageCursor = None,
    consistency: ReadConsistency = "eventual",
    as_of: AsOf = None,
) -> ExportPage:
    owner = caller_user_id(claims(router), user_id)
    return get_service().export(
        user_id=owner,
        history=history,
        limit=limit,
        cursor=cursor,
        consistency=consistency,
        as_of=schemas.as_of_param(as_of),
    )


@router.get(
    "/memories/<memory_id>",
    summary="One of the caller's memories",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("The memory (live or not)", MemoryRecord)},
)
def get_memory(
    memory_id: Annotated[uuid.UUID, Path()],
    user_id: Annotated[UserId | None, Query()] = None,
    consistency: ReadConsistency = "eventual",
) -> MemoryRecord:
    owner = caller_user_id(claims(router), user_id)
    return get_service().get(memory_id, user_id=owner, consistency=consistency)


@router.patch(
    "/memories/<memory_id>",
    summary="Change one of the caller's memories (fields left out stay; null clears expires_at or metadata)",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented("The memory as it now is", MemoryRecord),
        409: schemas.documented("Another memory of the same scope already states this content", schemas.ErrorBody),
        413: schemas.documented("The content is longer than AGENT_MEMORY_MAX_MEMORY_CHARS", schemas.ErrorBody),
    },
)
def update_memory(
    memory_id: Annotated[uuid.UUID, Path()],
    changes: MemoryChanges,
    user_id: Annotated[UserId | None, Query()] = None,
) -> MemoryRecord:
    owner = caller_user_id(claims(router), user_id)
    return get_service().update(memory_id, changes, user_id=owner, source="api")


@router.get(
    "/memories/<memory_id>/history",
    summary="Every recorded change of one of the caller's memories, oldest first",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("The memory's history", schemas.MemoryHistory)},
)
def memory_history(
    memory_id: Annotated[uuid.UUID, Path()],
    user_id: Annotated[UserId | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_HISTORY, description=HISTORY_LIMIT_HELP)] = DEFAULT_HISTORY_PAGE,
    cursor: Annotated[
        str | None, Query(max_length=MAX_CURSOR_CHARS, description="The previous page's next_cursor.")
    ] = None,
    consistency: ReadConsistency = "eventual",
) -> schemas.MemoryHistory:
    owner = caller_user_id(claims(router), user_id)
    page = get_service().history_page(memory_id, user_id=owner, limit=limit, cursor=cursor, consistency=consistency)
    if not page.events and cursor is None:
        # Same answer for another user's memory and for none at all: nothing leaks.
        raise NotFound("no history for this memory and user")
    return page


@router.delete(
    "/memories/<memory_id>",
    summary="Forget one of the caller's memories",
    responses={**schemas.COMMON_ERRORS, 204: schemas.no_content("Deleted")},
)
def forget_memory(
    memory_id: Annotated[uuid.UUID, Path()],
    user_id: Annotated[UserId | None, Query()] = None,
) -> Response[None]:
    owner = caller_user_id(claims(router), user_id)
    if not get_service().delete(memory_id, user_id=owner, source="api"):
        # The same answer whether the id exists for another user or not at all: nothing leaks.
        raise NotFound("no memory with this id for this user")
    return Response(status_code=204)


@router.delete(
    "/memories",
    summary="Forget everything stored about a user (user_id is required, also with a JWT); the erasure receipt",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented(
            "All deleted: the receipt (counts, time, requester; the user only as a keyed hash), also "
            "readable later at /erasures/{id}",
            schemas.ErasureReceipt,
        ),
    },
)
def forget_all(user_id: Annotated[UserId | None, Query()] = None) -> schemas.ErasureReceipt:
    if user_id is None:
        # Naming the user is required even with a token, so a stray DELETE never wipes anything.
        raise InvalidInput("user_id is required to forget all memories", field="user_id")
    token = claims(router)
    owner = caller_user_id(token, user_id)
    return get_service().forget_user(owner, requested_by=requester(token, iam_arn(router)))
