"""``/memories/pending`` and ``/memories/{id}/review``: the writes held for review
(AGENT_MEMORY_REVIEW_WRITES), and a person's decision on one; ``/users``: whose memories a
reviewer (the page's user picker) may open."""

from __future__ import annotations

import uuid
from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from rushmem.http.identity import caller_user_id
from rushmem.lifecycle import get_service
from rushmem.routes.request import claims
from rushmem_contract import schemas
from rushmem_contract.errors import Forbidden
from rushmem_contract.models import MAX_PAGE, PendingPage, ProjectId, ReviewOutcome, UserId, UserList

router = Router()


@router.get(
    "/memories/pending",
    summary="The caller's writes waiting for review (never recalled until approved), oldest first",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("The pending writes", PendingPage)},
)
def pending_memories(
    user_id: Annotated[UserId | None, Query()] = None,
    project_id: Annotated[ProjectId | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = MAX_PAGE,
) -> PendingPage:
    owner = caller_user_id(claims(router), user_id)
    return PendingPage(memories=get_service().pending(user_id=owner, project_id=project_id, limit=limit))


@router.post(
    "/memories/<pending_id>/review",
    summary="Approve or reject one of the caller's writes held for review",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented("What the decision did (approved: the memory it became)", ReviewOutcome),
    },
)
def review_memory(pending_id: Annotated[uuid.UUID, Path()], request: schemas.ReviewRequest) -> ReviewOutcome:
    owner = caller_user_id(claims(router), request.user_id)
    return get_service().review(pending_id, request.decision, user_id=owner, source="api")


@router.get(
    "/users",
    summary="Every user with their counts of memories (an IAM caller or the local server; not a JWT user)",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented("The users, by id", UserList),
        403: schemas.documented("A JWT user may see only their own memories", schemas.ErrorBody),
    },
)
def users(limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = MAX_PAGE) -> UserList:
    if claims(router) is not None:
        # A token speaks for one user: it may not learn who else has memories.
        raise Forbidden("a JWT caller may not list users (an IAM caller or the local server may)")
    return UserList(users=get_service().admin.users(limit=limit))
