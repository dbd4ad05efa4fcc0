"""Extraction instructions per project: set (a new version), read, list the versions; and the
ones a conversation's extraction uses (the project's stored ones, else the deployment's setting)."""

from __future__ import annotations

import builtins
import logging
import uuid

from rushmem.config import Settings
from rushmem.privacy.detectors import RegexDetector
from rushmem.service.base import Collaborators
from rushmem.store.extraction import instructions as store
from rushmem_contract.errors import InvalidInput
from rushmem_contract.instructions import MAX_INSTRUCTION_VERSIONS, ExtractionInstructions, StoredInstructions

logger = logging.getLogger(__name__)

# Instructions go into every extraction prompt and every caller of the project reads them back: a
# credential (key, token, password) in them is refused, with the write path's own detectors.
_SECRETS = RegexDetector(("credential",))


def check_instructions(instructions: ExtractionInstructions) -> None:
    """InvalidInput naming the field that holds a credential."""
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
    version, else the deployment's (``AGENT_MEMORY_EXTRACTION_INSTRUCTIONS``), else None."""
    stored: StoredInstructions | None = parts.db.run(lambda conn: store.latest_instructions(conn, user_id, project_id))
    if stored is not None:
        return stored
    default = parts.settings.extraction_instructions
    if default is None or default.empty:
        return None
    return StoredInstructions(user_id=user_id, project_id=project_id, instructions=default, deployment_default=True)


class Instructing:
    # Memory sets both: its settings, and the collaborators its verbs and its admin share.
    settings: Settings
    _parts: Collaborators

    def set_instructions(
        self,
        instructions: ExtractionInstructions,
        *,
        user_id: str,
        project_id: str | None = None,
        source: str | None = None,
    ) -> StoredInstructions:
        """Store the extraction instructions of the user's project (without ``project_id``: of the
        user's conversations without a project) as its next version; the previous versions stay in
        :meth:`instructions_history`. Empty instructions are a version too (the deployment's then
        no longer apply). InvalidInput naming the field for a credential in them."""
        instructions = ExtractionInstructions.model_validate(instructions.model_dump(exclude_unset=True))
        check_instructions(instructions)
        write_id = uuid.uuid4()
        stored: StoredInstructions = self._parts.db.run(
            lambda conn: store.set_instructions(
                conn, user_id, project_id, instructions, source=source, write_id=write_id
            ),
            retry=False,
        )
        logger.info(
            "instructions set",
            extra={"user_id": user_id, "project_id": project_id, "version": stored.version, "source": source},
        )
        return stored

    def instructions(self, *, user_id: str, project_id: str | None = None) -> StoredInstructions:
        """The instructions a conversation of this user and project is extracted with: the stored
        ones, else the deployment's (``deployment_default``), else empty (version 0)."""
        found = effective_instructions(self._parts, user_id, project_id)
        if found is None:
            return StoredInstructions(user_id=user_id, project_id=project_id, instructions=ExtractionInstructions())
        return found

    def instructions_history(
        self, *, user_id: str, project_id: str | None = None, limit: int = MAX_INSTRUCTION_VERSIONS
    ) -> builtins.list[StoredInstructions]:
        """The stored versions of the project's instructions (the last ``limit``), oldest first."""
        if not 1 <= limit <= MAX_INSTRUCTION_VERSIONS:
            raise InvalidInput(f"limit must be between 1 and {MAX_INSTRUCTION_VERSIONS}, got {limit}", field="limit")
        found: list[StoredInstructions] = self._parts.db.run(
            lambda conn: store.instruction_versions(conn, user_id, project_id, limit=limit)
        )
        return found
