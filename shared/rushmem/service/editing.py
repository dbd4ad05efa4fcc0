"""Changing what is stored: edit one memory, forget one or all of a user's, erasure receipts."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from rushmem.ingest.redaction import REDACTED_KEY
from rushmem.ingest.rows import (
    check_metadata,
)
from rushmem.service.reading import Reading
from rushmem.store.accounts import erasures
from rushmem.store.memories import catalog, edits
from rushmem.usage import UsageRow, metering
from rushmem_contract.errors import InputTooLarge, InvalidInput, NotFound
from rushmem_contract.models import MemoryChanges, MemoryRecord, describe_errors, error_field
from rushmem_contract.schemas import ErasureReceipt

logger = logging.getLogger(__name__)


def _memory_id(value: uuid.UUID | str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError as exc:
        raise InvalidInput(f"memory_id is not a uuid: {str(value)[:60]!r}", field="memory_id") from exc


class _Unset:
    """A keyword of :meth:`Editing.update` left out (None means: clear it)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def _changes(changes: MemoryChanges | Mapping[str, Any] | None, fields: dict[str, Any]) -> MemoryChanges:
    """The changes object, and the keyword fields given (they win); InvalidInput naming a bad one."""
    given = changes.model_dump(exclude_unset=True) if isinstance(changes, MemoryChanges) else dict(changes or {})
    given.update({k: v for k, v in fields.items() if v is not UNSET})
    try:
        return MemoryChanges.model_validate(given)
    except ValidationError as exc:
        raise InvalidInput(describe_errors(exc, "changes"), field=error_field(exc)) from exc


class Editing(Reading):
    def update(
        self,
        memory_id: uuid.UUID | str,
        changes: MemoryChanges | Mapping[str, Any] | None = None,
        *,
        user_id: str,
        source: str | None = None,
        content: str = UNSET,
        category: str = UNSET,
        metadata: Mapping[str, Any] | None = UNSET,
        expires_at: dt.datetime | None = UNSET,
        is_evergreen: bool = UNSET,
    ) -> MemoryRecord:
        """Change one memory and return it as it now is (its ``write_id`` names this edit); the
        history records an 'updated' event with ``source``, the write id and the previous values.
        The changes come as a :class:`MemoryChanges` (or a mapping of its fields) and/or as
        keywords (``update(id, content="...", user_id=...)``, as mem0's); a keyword left out stays,
        None clears what can be cleared (``metadata``, ``expires_at``). A new content of a current
        memory never rewrites the past: the previous text is kept as a version valid until now
        (``as_of`` before the edit reads it), unless ``typo_fix`` says it only fixes the wording. A
        new content is re-embedded and re-hashed; Conflict (409, field ``content``) when another
        memory of the same scope already states it; NotFound as :meth:`get`. No change given: the
        memory as it is."""
        memory_id = _memory_id(memory_id)
        fields = {
            "content": content,
            "category": category,
            "metadata": metadata,
            "expires_at": expires_at,
            "is_evergreen": is_evergreen,
        }
        wanted = _changes(changes, fields)
        values = wanted.changed()
        if not values:
            return self.get(memory_id, user_id=user_id, consistency="strong")  # as an update would answer
        vector = None
        used: list[UsageRow] = []
        if "content" in values:
            if len(values["content"]) > self.settings.max_memory_chars:
                raise InputTooLarge(
                    f"memory content is {len(values['content'])} characters; "
                    f"the limit is {self.settings.max_memory_chars}",
                    field="content",
                )
            with metering() as meter:
                self._redact_change(user_id, memory_id, values)
                vector = self._parts.embedder.embed([values["content"]])[0]
            meter.add("write", calls=1, items=1)
            used = self._parts.usage(meter)
        elif values.get("metadata"):
            self._redact_change(user_id, memory_id, values)
        if values.get("metadata"):
            check_metadata(self.settings, values["metadata"], "metadata")
        write_id = uuid.uuid4()
        updated: MemoryRecord | None = self._parts.db.run(
            lambda conn: edits.update_memory(
                conn,
                user_id,
                memory_id,
                values,
                embedding=vector,
                source=source,
                usage=used,
                write_id=write_id,
                keep_past=not wanted.typo_fix,
            )
        )
        if updated is None:
            raise NotFound("no memory with this id for this user")
        self._parts.reads.wrote(user_id)
        logger.info("updated", extra={"user_id": user_id, "fields": sorted(values), "source": source})
        return updated

    def _redact_change(self, user_id: str, memory_id: uuid.UUID, values: dict[str, Any]) -> None:
        """A new content or metadata passes the write path's redaction (AGENT_MEMORY_PII) like any
        other write: placeholders in the text and the metadata's string values, what was removed
        in the metadata's record; refused, naming the field, in drop mode."""
        if not self._parts.redactor.enabled:
            return
        given = values.get("metadata") if "metadata" in values else None
        outcome = self._parts.redactor.redact_change(values.get("content"), given)
        if outcome.dropped:
            raise InvalidInput(
                f"{outcome.dropped_field} holds personal data this deployment does not store (AGENT_MEMORY_PII)",
                field=outcome.dropped_field,
            )
        if outcome.content is not None:
            values["content"] = outcome.content
        if outcome.metadata is not None:
            values["metadata"] = outcome.metadata
        if outcome.removed:
            base = values["metadata"] if "metadata" in values else self.get(memory_id, user_id=user_id).metadata
            values["metadata"] = {**(base or {}), REDACTED_KEY: outcome.removed}

    def delete(self, memory_id: uuid.UUID, *, user_id: str, source: str | None = None) -> bool:
        """Delete one memory of the user; False when the user has no memory with that id."""
        deleted = bool(self._parts.db.run(lambda conn: catalog.delete_memory(conn, user_id, memory_id, source=source)))
        logger.info("forgot", extra={"user_id": user_id, "deleted": int(deleted), "one": True})
        if deleted:
            self._parts.publish_changes(user_id)
        return deleted

    def forget_user(self, user_id: str, *, requested_by: str = "service") -> ErasureReceipt:
        """Delete everything stored about the user (memories, history, message receipts, usage)
        and return the erasure receipt stored with the deletion, in one transaction
        (see :mod:`rushmem.store.accounts.erasures`). ``requested_by``: who asked, for the receipt; never
        the user's own id."""
        receipt: ErasureReceipt = self._parts.db.run(
            lambda conn: erasures.erase_user(conn, user_id, requested_by=requested_by), retry=False
        )
        # The receipt's id, not the user's: logs outlive the erasure.
        logger.info("erased", extra={"erasure_id": str(receipt.id), "deleted": receipt.deleted.model_dump()})
        self._parts.reads.erased(user_id)  # never served again by a reader that has not replayed this
        self._parts.publish_changes(user_id)
        return receipt

    def erasure(self, receipt_id: uuid.UUID, *, user_id: str | None = None) -> ErasureReceipt:
        """A stored erasure receipt; with ``user_id`` (a JWT caller), only that user's own."""
        found: ErasureReceipt | None = self._parts.db.run(
            lambda conn: erasures.get_receipt(conn, receipt_id, user_id=user_id)
        )
        if found is None:
            raise NotFound("no erasure receipt with this id")
        return found

    def erasures(self, user_id: str) -> list[ErasureReceipt]:
        """Every erasure receipt of this user id, oldest first (matched by the keyed hash)."""
        found: list[ErasureReceipt] = self._parts.db.run(lambda conn: erasures.receipts_for(conn, user_id))
        return found
