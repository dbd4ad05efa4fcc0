"""What of a ranked answer reaches the agent: the relevance cut and the token budget."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rushmem.recall.block import assemble_block, block_lines, count_tokens, over_budget
from rushmem.recall.cut import relevance_cut

SVG = [
    "The user is building an SVG editor platform with live preview, code editing and export.",
    "Every SVG modification must be synced to the defaultSVG variable.",
    "The user's stack is TypeScript, with React for the UI.",
    "The user is training for a half marathon.",
    "The user's favourite food is ramen.",
]


def test_tokens_are_a_quarter_per_ascii_character_and_one_per_other_character_line_by_line() -> None:
    assert count_tokens("") == 0
    assert count_tokens("abcd") == 1 and count_tokens("abcde") == 2
    assert count_tokens("abcde\nabcde") == 4  # each line rounds up on its own
    assert count_tokens("東京に住んでいる") == 8  # no script is counted at English's rate
    assert count_tokens("café") == 2  # "caf" 1, "é" 1


def test_a_budget_fills_the_block_in_order_and_the_block_holds_no_more_than_it() -> None:
    lines = block_lines(SVG)
    whole = count_tokens(assemble_block(lines))
    for budget in range(1, whole + 5):
        left_out = over_budget(lines, budget)
        block = assemble_block(line for i, line in enumerate(lines) if i not in left_out)
        assert count_tokens(block) <= budget or block == ""
        if budget >= whole:
            assert not left_out and block == assemble_block(lines)


def test_a_shorter_memory_after_one_that_does_not_fit_still_joins() -> None:
    lines = ["a" * 400, "b" * 10]
    frame = count_tokens(assemble_block(["x"])) - count_tokens("1. x")
    assert over_budget(lines, frame + count_tokens("1. " + "b" * 10)) == {0}


def test_too_small_a_budget_leaves_everything_out_and_skipped_lines_are_not_numbered() -> None:
    lines = block_lines(SVG)
    assert over_budget(lines, 5) == set(range(len(SVG)))
    # The skipped line takes no number: the next is "1.", so counted as the block will show it.
    cost = count_tokens(assemble_block([lines[1]]))
    assert over_budget(lines[:2], cost, skip={0}) == set()


@given(st.lists(st.text(min_size=1, max_size=80), max_size=8), st.integers(min_value=1, max_value=400))
def test_the_budget_holds_for_any_text(contents: list[str], budget: int) -> None:
    lines = block_lines(contents)
    left_out = over_budget(lines, budget)
    block = assemble_block(line for i, line in enumerate(lines) if i not in left_out)
    assert count_tokens(block) <= budget or block == ""


def test_the_cut_leaves_out_what_scores_far_below_the_best_and_names_why() -> None:
    # The demo's scores: the SVG facts, then the personal ones near zero.
    scores = [0.490, 0.301, 0.069, 0.005, 0.001, 0.0]
    dropped = relevance_cut(scores, min_score=0.0, min_relative_score=0.6)
    assert sorted(dropped) == [2, 3, 4, 5]
    assert all(outcome == "below_relative_score" and "0.6 x the best" in why for outcome, why in dropped.values())
    assert relevance_cut(scores, min_score=0.0, min_relative_score=0.0) == {}  # the article's fill-the-limit
    floor = relevance_cut(scores, min_score=0.01, min_relative_score=0.0)
    assert sorted(floor) == [3, 4, 5] and {o for o, _ in floor.values()} == {"below_min_score"}


def test_the_cut_keeps_the_best_whatever_its_score() -> None:
    assert relevance_cut([0.02, 0.015], min_score=0.0, min_relative_score=0.6) == {}
    assert relevance_cut([0.0, 0.0], min_score=0.0, min_relative_score=0.6) == {}
    assert relevance_cut([], min_score=0.0, min_relative_score=0.6) == {}
