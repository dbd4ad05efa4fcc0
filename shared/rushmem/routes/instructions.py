"""``/instructions``: a project's extraction instructions (what its extractor keeps and ignores, its
own categories): read, replace (a new version), and the versions."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from rushmem.http.identity import caller_user_id
from rushmem.lifecycle import get_service
from rushmem.routes.request import claims
from rushmem_contract import schemas
from rushmem_contract.instructions import (
    MAX_INSTRUCTION_VERSIONS,
    ExtractionInstructions,
    InstructionsHistory,
    InstructionsRequest,
    StoredInstructions,
)
from rushmem_contract.models import ProjectId, UserId

router = Router()


@router.get(
    "/instructions",
    summary="The extraction instructions a project's conversations are extracted with",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented(
            "The current version (version 0: none stored; the deployment's, if any, are shown)", StoredInstructions
        ),
    },
)
def get_instructions(
    user_id: Annotated[UserId | None, Query()] = None,
    project_id: Annotated[ProjectId | None, Query(description="The project (none: conversations without one).")] = None,
) -> StoredInstructions:
    owner = caller_user_id(claims(router), user_id)
    return get_service().instructions(user_id=owner, project_id=project_id)


@router.put(
    "/instructions",
    summary="Replace a project's extraction instructions (the previous version stays in the history)",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented("The stored version", StoredInstructions),
    },
)
def put_instructions(request: InstructionsRequest) -> StoredInstructions:
    owner = caller_user_id(claims(router), request.user_id)
    given = ExtractionInstructions.model_validate(request.model_dump(exclude={"user_id", "project_id"}))
    return get_service().set_instructions(given, user_id=owner, project_id=request.project_id, source="api")


@router.get(
    "/instructions/history",
    summary="Every stored version of a project's extraction instructions, oldest first",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("The versions", InstructionsHistory)},
)
def instructions_history(
    user_id: Annotated[UserId | None, Query()] = None,
    project_id: Annotated[ProjectId | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_INSTRUCTION_VERSIONS)] = MAX_INSTRUCTION_VERSIONS,
) -> InstructionsHistory:
    owner = caller_user_id(claims(router), user_id)
    versions = get_service().instructions_history(user_id=owner, project_id=project_id, limit=limit)
    return InstructionsHistory(versions=versions)
