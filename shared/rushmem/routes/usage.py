"""``GET /usage``: a user's usage per day and its estimated cost."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from rushmem.http.identity import caller_user_id
from rushmem.lifecycle import get_service
from rushmem.routes.request import claims
from rushmem_contract import schemas
from rushmem_contract.models import UserId

router = Router()


@router.get(
    "/usage",
    summary="A user's usage per day (recalls, conversations, writes, LLM and embedding calls, tokens) and its cost",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("Usage lines and estimated cost", schemas.UsageReport)},
)
def usage(
    user_id: Annotated[UserId | None, Query()] = None,
    start: Annotated[dt.date | None, Query(alias="from", description="First UTC day (default: 29 days ago).")] = None,
    end: Annotated[dt.date | None, Query(alias="to", description="Last UTC day, included (default: today).")] = None,
) -> schemas.UsageReport:
    owner = caller_user_id(claims(router), user_id)
    return get_service().usage(owner, start=start, end=end)
