"""docs/api.md's "Coming from mem0" table against the code: every call it names here is a method
of every Python door and builds its request as every door builds it (the operation's request model);
every mem0 call it lists either does the same as written or is refused naming the word to use. What
the calls do against a store: tests/integration/test_public_api.py."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from rushmem import Memory
from rushmem_client import AsyncMemoryClient, MemoryClient
from rushmem_contract import operations as ops
from rushmem_contract.errors import InvalidInput
from rushmem_contract.methods import Method, Operations
from rushmem_contract.models import MEM0_WORDS

API = Path(__file__).resolve().parents[2] / "docs" / "api.md"
# The words of the issue (43) a mem0 user reaches for first.
MEM0_VERBS = {"add", "search", "get_all", "get", "update", "history", "delete", "delete_all"}
# What the table's names stand for.
VALUES: dict[str, Any] = {
    "messages": [{"role": "user", "content": "I'm vegan and I live in Lisbon."}],
    "query": "what should I cook tonight?",
    "memory_id": uuid.UUID("6f1c5c7e-3b7a-4f0a-9a7a-1234567890ab"),
    "data": "Prefers green tea",
    "u": "alice",
    "a": "planner",
    "n": 3,
    "meta": {"app": "chat"},
    "user_filter": {"user_id": "alice"},
    "False": False,
}
CALL = re.compile(r"^m\.(\w+)\((.*)\)$")
ROUTE = re.compile(r"^(GET|POST|PATCH|DELETE) (\S+)$")


def rows() -> list[tuple[list[str], list[str]]]:
    """The table's rows: the code spans of its mem0 column and of its "here" column."""
    text = API.read_text(encoding="utf-8")
    section = text.split("## Coming from mem0", 1)[1].split("\n## ", 1)[0]
    found = []
    for line in section.splitlines():
        if line.startswith("| `"):
            mem0, here = line.strip("|").split(" | ")[:2]
            found.append((re.findall(r"`([^`]+)`", mem0), re.findall(r"`([^`]+)`", here)))
    return found


def call(span: str) -> tuple[str, list[Any], dict[str, Any]]:
    """``m.name(a, k=v)`` as the method's name, its positional values and its keywords."""
    match = CALL.match(span)
    assert match, span
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in match.group(2).split(","))):
        name, _, value = part.partition("=")
        if value:
            kwargs[name] = VALUES[value]
        else:
            args.append(VALUES[name])
    return match.group(1), args, kwargs


def request(spans: list[str]) -> Any:
    """A route and its body's fields (``POST /memories`` ``{"messages", "user_id"}``) built as the
    route's request."""
    route = ROUTE.match(spans[0])
    assert route, spans
    fields = re.findall(r'"(\w+)"', spans[1])
    op = next((o for o in ops.OPERATIONS if o.route == spans[0]), None)
    assert op is not None, f"no route {spans[0]}"
    return op.build(**{f: VALUES["u"] if f == "user_id" else VALUES[f] for f in fields})


def test_the_table_covers_the_words_a_mem0_user_reaches_for_first() -> None:
    named = {CALL.match(spans[0]).group(1) for spans, _ in rows() if CALL.match(spans[0])}  # type: ignore[union-attr]
    assert named >= MEM0_VERBS
    assert any(spans[0].startswith("POST ") for spans, _ in rows())  # mem0's REST add, with messages


@pytest.mark.parametrize("here", [r[1] for r in rows()], ids=lambda spans: spans[0])
def test_every_call_here_is_a_method_of_every_python_door_and_builds_its_request(here: list[str]) -> None:
    if ROUTE.match(here[0]):
        request(here)
        return
    name, args, kwargs = call(here[0])
    method = vars(Operations).get(name)
    assert isinstance(method, Method), name
    for door in (Memory, MemoryClient, AsyncMemoryClient):
        assert callable(getattr(door, name)), (door, name)
    method.op.build(*args, **kwargs)


@pytest.mark.parametrize("row", rows(), ids=lambda row: row[0][0])
def test_every_mem0_call_works_as_written_or_is_refused_naming_the_word_to_use(
    row: tuple[list[str], list[str]],
) -> None:
    mem0, here = row
    if ROUTE.match(mem0[0]):
        path = mem0[0].split()[1].removeprefix("/v1").rstrip("/")
        request([f"{mem0[0].split()[0]} {path}", mem0[1]])  # mem0's body, at our path
        return
    name, args, kwargs = call(mem0[0])
    method = vars(Operations).get(name)
    assert isinstance(method, Method), f"mem0's {name} is not a method here"
    if mem0 == here:
        method.op.build(*args, **kwargs)
        return
    with pytest.raises(InvalidInput) as refused:
        method.op.build(*args, **kwargs)
    unknown = set(kwargs) - set(method.op.request.model_fields)
    unknown |= {f"{k}.{inner}" for k, v in kwargs.items() if isinstance(v, dict) and k == "filters" for inner in v}
    assert unknown and all(MEM0_WORDS.get(word) or MEM0_WORDS.get(word.rsplit(".", 1)[-1]) for word in unknown)
    for word in unknown:
        hint = MEM0_WORDS.get(word) or MEM0_WORDS[word.rsplit(".", 1)[-1]]
        assert hint in str(refused.value), (word, str(refused.value))
    # The name the refusal gives is the one the table's call here uses.
    _, _, ours = call(here[0])
    assert any(f"is {k}" in str(refused.value) or f"{k}=" in str(refused.value) for k in ours), str(refused.value)
