"""docs/api.md lists every public method of ``Memory`` with its signature; this keeps the list true
(a method added, removed or changed without the docs fails here, and prints the block to paste)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import rushmem
from rushmem import Memory

API_DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"
BLOCK = re.compile(r"<!-- memory-signatures -->\n```python\n(.*?)```", re.DOTALL)


def signature_line(name: str) -> str:
    """``name(params) -> Return`` without parameter annotations (the docs' table says what they take)."""
    function = getattr(Memory, name)
    signature = inspect.signature(function)
    params = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values() if p.name != "self"]
    plain = signature.replace(parameters=params, return_annotation=inspect.Signature.empty)
    returns = signature.return_annotation
    returns = returns if isinstance(returns, str) else getattr(returns, "__name__", str(returns))
    return f"Memory.{name}{plain} -> {returns.replace('builtins.', '')}"


def public_methods() -> list[str]:
    return sorted(
        name for name, member in inspect.getmembers(Memory) if not name.startswith("_") and inspect.isfunction(member)
    )


def expected_block() -> str:
    return "".join(signature_line(name) + "\n" for name in public_methods())


def test_docs_list_every_public_memory_method_with_its_signature() -> None:
    found = BLOCK.search(API_DOCS.read_text(encoding="utf-8"))
    assert found, "docs/api.md lost its <!-- memory-signatures --> block"
    assert found.group(1) == expected_block(), "docs/api.md's signatures drifted; the code's are:\n" + expected_block()


def test_the_mem0_style_calls_exist_with_the_keywords_a_mem0_user_guesses() -> None:
    add = inspect.signature(Memory.add).parameters
    assert {"user_id", "metadata", "infer"} <= set(add)
    update = inspect.signature(Memory.update).parameters
    assert {"content", "user_id", "metadata"} <= set(update)


def test_the_public_types_come_from_the_top_package() -> None:
    for name in rushmem.__all__:
        assert getattr(rushmem, name) is not None, name
    assert {"NewMemory", "MemoryChanges", "StoredIds", "RecallResult", "InvalidInput", "NotFound"} <= set(
        rushmem.__all__
    )
