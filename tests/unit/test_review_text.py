"""Text shown for review (rushmem_contract.inputs.reveal_hidden): what shows nothing is written as
<U+XXXX>, so that what a person approves is what is there; what shows is left as it is."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from rushmem_contract.inputs import reveal_hidden


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("pay\u200bpal", "pay<U+200B>pal"),  # zero-width space
        ("soft\u00adhyphen", "soft<U+00AD>hyphen"),
        ("abc\u202edef\u202c", "abc<U+202E>def<U+202C>"),  # bidi override and its pop
        ("x\u2066y\u2069", "x<U+2066>y<U+2069>"),  # bidi isolates
        ("tag\U000e0041\U000e007f", "tag<U+E0041><U+E007F>"),  # tag characters
        ("\ufeffstart", "<U+FEFF>start"),  # byte order mark
        ("ok\ufe0f", "ok<U+FE0F>"),  # variation selector
        ("a\u3164b", "a<U+3164>b"),  # Hangul filler: a letter that renders as nothing
        ("bell\x07", "bell<U+0007>"),  # a control
        ("line\u2028break", "line<U+2028>break"),
        ("private\ue000", "private<U+E000>"),
        ("a\u200db", "a<U+200D>b"),  # a joiner inside a Latin word hides a split
        ("end\u200d", "end<U+200D>"),
    ],
)
def test_hidden_characters_are_made_visible(text: str, shown: str) -> None:
    assert reveal_hidden(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "The user prefers TypeScript",
        "Le café à Zürich — 5 €",
        "用户喜欢绿茶",
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # a family emoji: its joiners shape it
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian: the non-joiner shapes the word
        "tab\tand\nnewline",
        "e\u0301",  # a combining mark on its base shows
    ],
)
def test_what_shows_is_left_as_it_is(text: str) -> None:
    assert reveal_hidden(text) == text


MARKER = re.compile(r"<U\+([0-9A-F]{4,6})>")
HIDDEN = {"Cf", "Cc", "Co", "Cn", "Cs", "Zl", "Zp"}


@given(st.text())
def test_property_revealed_text_hides_nothing_and_reads_back_as_the_text(text: str) -> None:
    assume("<U+" not in text)
    shown = reveal_hidden(text)
    assert reveal_hidden(shown) == shown  # idempotent: its markers are visible ASCII
    # Nothing left that shows nothing, but tab, newline and the joiners kept as the door keeps them.
    for i, ch in enumerate(shown):
        if unicodedata.category(ch) in HIDDEN and ch not in "\t\n":
            assert ch in "\u200c\u200d" and not shown[i - 1].isascii() and not shown[i + 1].isascii()
    # Nothing lost: each marker names the character it stands for.
    assert MARKER.sub(lambda m: chr(int(m.group(1), 16)), shown) == text
