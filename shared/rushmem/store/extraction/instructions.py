"""The ``extraction_instructions`` table (migration 0015): a user's project's instructions to the
extractor, one row per version (a change inserts the next version; the older ones are the history)."""

from __future__ import annotations

import uuid
from typing import Any

from psycopg.types.json import Jsonb

from rushmem.store.engine.session import Session, json_rows
from rushmem.store.engine.transactions import read_as_user, user_transaction
from rushmem_contract.instructions import ExtractionInstructions, StoredInstructions

_COLUMNS = "user_id, project_key, version, instructions, source, write_id, created_at"

# The project's last versions, newest first.
_LAST = f"""
SELECT {_COLUMNS} FROM extraction_instructions
WHERE user_id = %(user_id)s AND project_key = %(project_key)s
ORDER BY version DESC LIMIT %(limit)s
"""

# The next version under the user's lock (user_transaction(lock=True)): two writers never take one number.
_INSERT = f"""
INSERT INTO extraction_instructions (user_id, project_key, version, instructions, source, write_id)
SELECT %(user_id)s, %(project_key)s, coalesce(max(version), 0) + 1, %(instructions)s, %(source)s, %(write_id)s
FROM extraction_instructions WHERE user_id = %(user_id)s AND project_key = %(project_key)s
RETURNING {_COLUMNS}
"""


def project_key(project_id: str | None) -> str:
    return project_id or ""


def _stored(row: dict[str, Any]) -> StoredInstructions:
    """A version from its row: the row's columns are the model's fields but the project's key."""
    return StoredInstructions.model_validate({**row, "project_id": row["project_key"] or None})


def latest_instructions(conn: Session, user_id: str, project_id: str | None) -> StoredInstructions | None:
    """The project's current instructions, None when it has none stored; one round trip."""
    params = {"user_id": user_id, "project_key": project_key(project_id), "limit": 1}
    # Read on every ingested conversation, so it costs what the receipt check costs: one request
    # (its row as JSON where the read is one statement; the model reads either form).
    rows = conn.read_once_as_user(user_id, json_rows(_LAST) if conn.single_statement_reads else _LAST, params)
    return _stored(rows[0]) if rows else None


def instruction_versions(
    conn: Session, user_id: str, project_id: str | None, *, limit: int
) -> list[StoredInstructions]:
    """The project's last ``limit`` versions, oldest first."""
    params = {"user_id": user_id, "project_key": project_key(project_id), "limit": limit}
    rows = read_as_user(conn, user_id, _LAST, params)
    return [_stored(row) for row in reversed(rows)]


def set_instructions(
    conn: Session,
    user_id: str,
    project_id: str | None,
    instructions: ExtractionInstructions,
    *,
    source: str | None,
    write_id: uuid.UUID,
) -> StoredInstructions:
    """Store the next version of the project's instructions and return it."""
    params = {
        "user_id": user_id,
        "project_key": project_key(project_id),
        "instructions": Jsonb(instructions.model_dump(mode="json", exclude_defaults=True)),
        "source": source,
        "write_id": write_id,
    }
    with user_transaction(conn, user_id, source=source, reason="instructions", lock=True, write_id=write_id):
        row = conn.execute_dicts(_INSERT, params).fetchone()
    assert row is not None
    return _stored(row)
