"""Vectors go to PostgreSQL in binary: as text, an array of ten 384-d vectors costs ~6 ms to
format and parse (measured by `agent-memory bench ingest`), more than the rest of a write."""

from __future__ import annotations

from typing import Any

import pytest
from pgvector.psycopg.vector import VectorBinaryDumper, VectorDumper
from psycopg.types import TypeInfo

from agent_memory.models import NewMemory
from agent_memory.service import MemoryService


class _TextRefused(VectorDumper):
    def dump(self, obj: Any) -> bytes:
        raise AssertionError("a vector was sent to PostgreSQL as text")


@pytest.fixture
def binary_only(service: MemoryService) -> MemoryService:
    """The service's connection with the text form of vectors refused (binary still works)."""
    conn = service.db.connection()
    info = TypeInfo.fetch(conn, "vector")
    assert info is not None
    refused = type("TextRefused", (_TextRefused,), {"oid": info.oid})
    binary = type("Binary", (VectorBinaryDumper,), {"oid": info.oid})
    conn.adapters.register_dumper("numpy.ndarray", refused)
    conn.adapters.register_dumper("numpy.ndarray", binary)  # registered last: what %s picks for one vector
    return service


def test_remember_sends_its_vectors_in_binary(binary_only: MemoryService) -> None:
    facts = ["Prefers TypeScript", "Lives in Lisbon", "Has a dog named Biscuit"]
    # The near-duplicate check and the upsert both pass the batch's vectors as an array.
    first = binary_only.remember("u1", [NewMemory(content=f) for f in facts])
    again = binary_only.remember("u1", [NewMemory(content=f + "!") for f in facts])  # restated: folds
    assert first.created == 3 and again.created == 0
    assert binary_only.recall("u1", "TypeScript").memories[0].content == "Prefers TypeScript"
