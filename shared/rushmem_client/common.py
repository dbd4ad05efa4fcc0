"""Small helpers both client halves use."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from rushmem_contract.models import ChatMessage, NewMemory


def without_none(**values: Any) -> dict[str, Any]:
    """The arguments that were given: the API's defaults apply to the rest."""
    return {k: v for k, v in values.items() if v is not None}


def region_from_host(host: str, pattern: re.Pattern[str]) -> str | None:
    """The AWS region in an endpoint's host name (execute-api, sqs), if ``pattern`` finds one."""
    match = pattern.match(host.lower())
    return match.group(1) if match else None


def conversation_fields(
    *,
    user_id: str | None,
    project_id: str | None,
    conversation_id: str | None,
    ended_at: dt.datetime | None,
    messages: Sequence[Mapping[str, Any] | ChatMessage],
    memories: Sequence[str | Mapping[str, Any] | NewMemory],
) -> dict[str, Any]:
    """A "conversation ended" message as POST /conversations and the ingest queue take it: the
    fields given, the messages and memories as plain data (a string is a memory's content)."""
    return without_none(
        user_id=user_id,
        project_id=project_id,
        conversation_id=conversation_id,
        ended_at=ended_at,
        messages=[m.model_dump() if isinstance(m, BaseModel) else m for m in messages],
        memories=[
            {"content": m} if isinstance(m, str) else m.model_dump() if isinstance(m, BaseModel) else m
            for m in memories
        ],
    )
