"""The mem0-shaped calls exist with the keywords a mem0 user guesses, and the public types come from
the top package. (docs/api.md's list of methods is generated from the table: tests/unit/test_docs.py.)"""

from __future__ import annotations

import rushmem
from rushmem import Memory


def test_the_mem0_style_calls_exist_with_the_keywords_a_mem0_user_guesses() -> None:
    add = Memory.add.signature.parameters
    assert {"user_id", "metadata", "infer"} <= set(add)
    update = Memory.update.signature.parameters
    assert {"content", "user_id", "metadata"} <= set(update)
    assert Memory.search is Memory.recall and Memory.get_all is Memory.list


def test_the_public_types_come_from_the_top_package() -> None:
    for name in rushmem.__all__:
        assert getattr(rushmem, name) is not None, name
    assert {"NewMemory", "MemoryChanges", "StoredIds", "RecallResult", "InvalidInput", "NotFound"} <= set(
        rushmem.__all__
    )
