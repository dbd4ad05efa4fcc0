"""``GET /erasures/<id>``: an erasure receipt (``DELETE /memories`` makes them)."""

from __future__ import annotations

import uuid
from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from rushmem.http.identity import caller_user_id
from rushmem.lifecycle import get_service
from rushmem.routes.request import claims
from rushmem_contract import schemas

router = Router()


@router.get(
    "/erasures/<erasure_id>",
    summary="An erasure receipt: what forgetting a user deleted, when, at whose request",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented("The receipt", schemas.ErasureReceipt),
    },
)
def erasure(erasure_id: Annotated[uuid.UUID, Path()]) -> schemas.ErasureReceipt:
    token = claims(router)
    # A token reads only its own user's receipts (the same 404 otherwise); an IAM caller any.
    own = caller_user_id(token, None) if token is not None else None
    return get_service().erasure(erasure_id, user_id=own)
