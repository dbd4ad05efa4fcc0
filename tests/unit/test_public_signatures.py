"""The mem0-shaped calls exist with the keywords a mem0 user guesses, and the public types come from
the top package. (docs/api.md's list of methods is generated from the table: tests/unit/test_docs.py.)"""

from __future__ import annotations

import inspect
import pydoc

import rushmem
from rushmem import Memory
from rushmem_client import AsyncMemoryClient, MemoryClient


def test_the_mem0_style_calls_exist_with_the_keywords_a_mem0_user_guesses() -> None:
    add = inspect.signature(Memory.add).parameters
    assert {"user_id", "metadata", "infer"} <= set(add)
    update = inspect.signature(Memory.update).parameters
    assert {"content", "user_id", "metadata"} <= set(update)
    assert Memory.search is Memory.recall and Memory.get_all is Memory.list


def test_help_on_a_method_of_the_class_shows_its_fields() -> None:
    # What a user types in a REPL or an IDE shows on hover: the request's fields, not a descriptor.
    for door in (Memory, MemoryClient, AsyncMemoryClient):
        shown = pydoc.plain(pydoc.render_doc(door.recall))
        assert "recall(self, /, query=None, *, user_id=None" in shown and "relevant to a query" in shown
        assert list(inspect.signature(door.recall).parameters)[:2] == ["self", "query"]


def test_the_public_types_come_from_the_top_package() -> None:
    for name in rushmem.__all__:
        assert getattr(rushmem, name) is not None, name
    assert {"NewMemory", "MemoryChanges", "StoredIds", "RecallResult", "InvalidInput", "NotFound"} <= set(
        rushmem.__all__
    )
