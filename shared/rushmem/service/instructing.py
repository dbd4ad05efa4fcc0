"""Extraction instructions per project: set (a new version), read, list the versions; and the
ones a conversation's extraction uses (the project's stored ones, else the deployment's setting)."""

from __future__ import annotations

import logging
import uuid

from rushmem.privacy.detectors import RegexDetector
from rushmem.service import pages
from rushmem.service.base import Collaborators
from rushmem.service.context import Context
from rushmem.store.extraction import instructions as store
from rushmem_contract.errors import InvalidInput
from rushmem_contract.instructions import (
    MAX_INSTRUCTIONS_JSON_CHARS,
    ExtractionInstructions,
    InstructionsHistory,
    InstructionsRequest,
    StoredInstructions,
)
from rushmem_contract.models import metadata_chars, too_large
from rushmem_contract.schemas import InstructionsHistoryRequest, InstructionsQuery

logger = logging.getLogger(__name__)

# Instructions go into every extraction prompt and every caller of the project reads them back: a
# credential (key, token, password) in them is refused, with the write path's own detectors.
_SECRETS = RegexDetector(("credential",))


def check_instructions(instructions: ExtractionInstructions) -> None:
    """InputTooLarge for instructions over MAX_INSTRUCTIONS_JSON_CHARS in all; InvalidInput naming
    the field that holds a credential."""
    chars = metadata_chars(instructions.model_dump(mode="json", exclude_defaults=True))
    if chars > MAX_INSTRUCTIONS_JSON_CHARS:
        raise too_large("instructions", chars, MAX_INSTRUCTIONS_JSON_CHARS, "characters as JSON (all parts together)")
    for field, text in instructions.texts():
        found = _SECRETS.detect(text)
        if found:
            raise InvalidInput(
                f"{field} holds what looks like a credential ({found[0].type}); instructions are shown to the "
                "extraction model and to every caller of the project, never put secrets in them",
                field=field,
            )


def effective_instructions(parts: Collaborators, user_id: str, project_id: str | None) -> StoredInstructions | None:
    """What a conversation of this user and project is extracted with: the project's latest stored
    version, else the deployment's (``RUSHMEM_EXTRACTION_INSTRUCTIONS``), else None."""
    stored: StoredInstructions | None = parts.db.run(lambda conn: store.latest_instructions(conn, user_id, project_id))
    if stored is not None:
        return stored
    default = parts.settings.extraction_instructions
    if default is None or default.empty:
        return None
    return StoredInstructions(user_id=user_id, project_id=project_id, instructions=default, deployment_default=True)


def set_instructions(parts: Collaborators, request: InstructionsRequest, ctx: Context) -> StoredInstructions:
    """Store the extraction instructions of the user's project (without ``project_id``: of the
    user's conversations without a project) as its next version; the previous versions stay in
    the history. Empty instructions are a version too (the deployment's then no longer apply).
    InvalidInput naming the field for a credential in them."""
    user_id, project_id = ctx.user, request.project_id
    instructions = ExtractionInstructions.model_validate(
        request.model_dump(exclude_unset=True, exclude={"user_id", "project_id"})
    )
    check_instructions(instructions)
    write_id = uuid.uuid4()
    stored: StoredInstructions = parts.db.run(
        lambda conn: store.set_instructions(
            conn, user_id, project_id, instructions, source=ctx.source, write_id=write_id
        ),
        retry=False,
    )
    ctx.wrote = True
    logger.info(
        "instructions set",
        extra={"user_id": user_id, "project_id": project_id, "version": stored.version, "source": ctx.source},
    )
    return stored


def get_instructions(parts: Collaborators, request: InstructionsQuery, ctx: Context) -> StoredInstructions:
    """The instructions a conversation of this user and project is extracted with: the stored
    ones, else the deployment's (``deployment_default``), else empty (version 0)."""
    user_id = ctx.user
    found = effective_instructions(parts, user_id, request.project_id)
    if found is None:
        return StoredInstructions(user_id=user_id, project_id=request.project_id, instructions=ExtractionInstructions())
    return found


def instructions_history(
    parts: Collaborators, request: InstructionsHistoryRequest, ctx: Context
) -> InstructionsHistory:
    """The stored versions of the project's instructions (the last ``limit``), oldest first."""
    user_id = ctx.user
    found: list[StoredInstructions] = parts.db.run(
        lambda conn: store.instruction_versions(conn, user_id, request.project_id, limit=request.limit)
    )
    # Within Lambda's answer: the newest versions that fit MAX_PAGE_BYTES (100 of the largest do not).
    newest = found[::-1]
    return InstructionsHistory(versions=newest[: pages.fitting(newest)][::-1])
