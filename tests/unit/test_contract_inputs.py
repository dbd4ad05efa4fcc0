"""Untrusted text and JSON values (rushmem_contract.inputs): what counts as visible, what jsonb and the
way back can hold, and how rows nested too deep are answered."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from rushmem.config import Settings
from rushmem.ingest.rows import check_lengths
from rushmem_contract.errors import InputTooLarge
from rushmem_contract.inputs import (
    CUT,
    JsonValueError,
    cut_deep,
    has_visible,
    inspect_json,
    lone_surrogate,
    visible_strings,
    visible_text,
)
from rushmem_contract.models import MAX_METADATA_DEPTH, NewMemory, RecalledMemory


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("a", True),
        ("  .  ", True),
        ("\u6f22", True),  # CJK
        ("\U0001f600", True),  # emoji (So)
        ("\U0001f1eb\U0001f1f7", True),  # a flag: regional indicators
        ("\u0661", True),  # Arabic-Indic digit
        ("\u200b\u200c\u200d\u2060\ufeff", False),  # zero-width and joiners
        ("\u202a\u202e\u2066\u2069\u200e\u061c", False),  # bidi controls and marks
        ("\ufe0f\ufe00\U000e0100", False),  # variation selectors
        ("\u0301\u034f", False),  # combining marks, grapheme joiner
        ("\u3000\u00a0\u2028", False),  # separators
        ("\u3164\uffa0\u115f\u1160\u2800", False),  # fillers and the braille blank
        ("\ue000", False),  # private use
        ("\x01\x7f", False),
    ],
)
def test_visible_means_something_on_screen(text: str, visible: bool) -> None:
    assert has_visible(text) is visible


def test_lone_surrogates_are_found_pairs_are_not() -> None:
    assert lone_surrogate("a\ud800b") == "\\ud800"
    assert lone_surrogate(json.loads('"\\ud83d\\ude00"')) is None
    assert lone_surrogate(json.loads('"\\ude00\\ud83d"')) == "\\ude00"


@pytest.mark.parametrize(
    ("value", "message", "path"),
    [
        ({"a": [1, float("nan")]}, "nan", ("a", 1)),
        ({"a": {"b": float("inf")}}, "inf", ("a", "b")),
        ({"a": "x\ud800"}, "surrogate", ("a",)),
        ({"\udfff": 1}, "surrogate", ()),
        ({"a": "\x00"}, "NUL", ("a",)),
        ({"a": {1: 2}}, "not a string", ("a",)),
        ({"a": {1, 2}}, "not a JSON value", ("a",)),
        (nested(5), "nested more than 4", ()),
    ],
)
def test_what_jsonb_cannot_hold_is_named_with_its_path(value: Any, message: str, path: tuple[Any, ...]) -> None:
    with pytest.raises(JsonValueError) as err:
        inspect_json(value, max_depth=4)
    assert message in str(err.value) and err.value.path == path


def test_depth_and_keys_are_counted_at_every_level() -> None:
    shape = inspect_json({"a": [1, {"b": 2, "c": []}], "d": 3}, max_depth=10)
    assert (shape.depth, shape.keys) == (4, 4)  # {} > [] > {} > []
    assert inspect_json("x", max_depth=1).depth == 0
    inspect_json(nested(10_000), max_depth=10_001)  # iterative: no recursion limit


def test_deep_values_are_cut_at_the_ceiling_and_then_serialise() -> None:
    deep = nested(400, "bottom")
    cut = cut_deep(deep, MAX_METADATA_DEPTH)
    assert inspect_json(cut, max_depth=MAX_METADATA_DEPTH).depth == MAX_METADATA_DEPTH
    assert json.dumps(cut).count(CUT) == 1
    shallow = {"a": [1, 2]}
    assert cut_deep(shallow, MAX_METADATA_DEPTH) is shallow
    memory = RecalledMemory.model_validate(
        {"id": "00000000-0000-0000-0000-000000000001", "content": "x", "category": "fact", "score": 1,
         "created_at": "2026-01-01T00:00:00Z", "is_evergreen": False, "project_id": None, "metadata": deep}
    )  # fmt: skip
    TypeAdapter(RecalledMemory).dump_json(memory)  # 400 levels would exceed pydantic's serializer


@pytest.mark.parametrize(
    ("metadata", "limits", "message"),
    [
        (nested(3), {"max_metadata_depth": 2}, "nested more than 2"),
        ({str(i): i for i in range(11)}, {"max_metadata_keys": 10}, "11 keys"),
        ({"a": "x" * 100}, {"max_metadata_chars": 50}, "characters as JSON"),
    ],
)
def test_the_configured_metadata_bounds_name_the_field(
    metadata: dict[str, Any], limits: dict[str, int], message: str
) -> None:
    settings_ = Settings(embedding_provider="hash", **limits)  # type: ignore[arg-type]
    memories = [NewMemory(content="fine"), NewMemory(content="bounded", metadata=metadata)]
    with pytest.raises(InputTooLarge) as err:
        check_lengths(settings_, memories, "memories")
    assert err.value.field == "memories[1].metadata" and message in str(err.value)
    check_lengths(Settings(embedding_provider="hash"), memories, "memories")  # within the defaults


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(st.characters(), max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_a_value_inspect_json_passes_round_trips_through_json(value: Any) -> None:
    try:
        inspect_json(value, max_depth=8)
    except JsonValueError:
        return
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")  # no lone surrogate left
    assert json.loads(text) == value


def test_metadata_is_sized_as_it_reads_back_from_jsonb() -> None:
    """Found by the write contract: {"n": 1e16} is 11 characters as sent, but jsonb writes the number
    without an exponent and it reads back as 10000000000000000 (an export then over the limit)."""
    memory = NewMemory(content="x", metadata={"n": 1e16, "m": [2.5e300, 0.5, 1e-7]})
    assert memory.metadata == {"n": 10**16, "m": [int(Decimal("2.5e300")), 0.5, 1e-7]}
    assert type(memory.metadata["n"]) is int
    near = {"s": "x" * 30, "n": 1e40}  # 59 characters as sent, 98 as stored
    with pytest.raises(InputTooLarge):
        check_lengths(
            Settings(embedding_provider="hash", max_metadata_chars=60), [NewMemory(content="x", metadata=near)], "m"
        )


# ---- metadata keys in the visible form (issue 23) ------------------------------------------------

KEY_CHARS = st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs", "Cf", "Mn"))


@settings(max_examples=300)
@given(st.dictionaries(st.text(KEY_CHARS, max_size=8), st.integers(), max_size=6))
def test_property_metadata_keys_read_as_a_reader_sees_them_or_are_refused(value: dict[str, int]) -> None:
    """Every key comes out in its visible form, no two keys merge (which value would win is not
    ours to guess: refused) and no key that showed something is emptied (refused)."""
    try:
        out = visible_strings(value)
    except JsonValueError:
        seen = [visible_text(k) for k in value]
        assert len(set(seen)) < len(seen) or any(
            s != k and not has_visible(s) for s, k in zip(seen, value, strict=True)
        )
        return
    assert len(out) == len(value)
    assert all(visible_text(k) == k for k in out)
    assert sorted(out.values()) == sorted(value.values())


def test_a_redaction_record_written_with_invisible_or_fullwidth_characters_is_dropped() -> None:
    for key in ("pii\u200b_redacted", "\uff50\uff49\uff49_redacted", "pii_redacted\u2060"):
        memory = NewMemory(content="Likes tea", metadata={key: {"email": 1}, "team": "web"})
        assert memory.metadata == {"team": "web"}, key
