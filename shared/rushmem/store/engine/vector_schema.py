"""Which vector column a connection uses: what a connection holds once it is set up, apart from the
connection itself so that both kinds of connection (psycopg's, the Data API's) can hold it."""

from __future__ import annotations

import dataclasses

from rushmem_contract.errors import SchemaChanged


@dataclasses.dataclass(frozen=True)
class VectorSchema:
    """Which vector column a connection may use, resolved from agent_memory_meta when it opens
    (:func:`rushmem.store.schema.migrate.prepare_connection`).

    Normally the column ``embedding``, read and write. During the grace period after
    ``rushmem reembed`` switched the store to a new model, a process still configured
    with the previous model reads ``embedding_prev`` and may not write (its vectors would
    land in the new model's column); it should be redeployed with the new model.
    """

    fingerprint: str
    column: str
    current_model: str

    @property
    def writable(self) -> bool:
        return self.column == "embedding"

    @property
    def meta_key(self) -> str:
        """The agent_memory_meta entry naming the model of ``column``."""
        return "embedding_model" if self.writable else "previous_model"

    def check(self, fingerprint: object) -> None:
        """SchemaChanged when the store's model for ``column`` (read in the same transaction or
        statement) is no longer this one: ``rushmem reembed`` switched models."""
        if fingerprint != self.fingerprint:
            raise SchemaChanged(f"the vectors this process reads ({self.column}) are no longer {self.fingerprint}")
