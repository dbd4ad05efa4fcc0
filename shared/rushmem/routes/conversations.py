"""``POST /conversations``: hand a finished conversation to the write path now."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from rushmem.http.identity import caller_user_id
from rushmem.lifecycle import get_service
from rushmem.observability import logger
from rushmem.routes.request import claims
from rushmem_contract import schemas
from rushmem_contract.models import IngestOutcome

router = Router()


@router.post(
    "/conversations",
    summary="Hand a finished conversation to the write path now and get what it stored",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented("What the message did (duplicate: it was written before)", IngestOutcome),
        413: schemas.documented("Too many messages or memories, or one too long", schemas.ErrorBody),
        502: schemas.documented("The extraction or embedding provider failed", schemas.ErrorBody),
    },
)
def add_conversation(request: schemas.ConversationRequest) -> IngestOutcome:
    user_id = caller_user_id(claims(router), request.user_id)
    outcome = get_service().ingest_conversation(request.message(user_id))
    logger.info("conversation ingested", extra={"outcome": outcome.model_dump(mode="json", exclude={"ids"})})
    return outcome
